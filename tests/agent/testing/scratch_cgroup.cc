#include "tests/agent/testing/scratch_cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/descriptors/cgroup_fs.h"

namespace ringside::agent::testing {

ScratchCgroup::ScratchCgroup(const std::string& leaf, bool make_leaf) {
  if (geteuid() != 0) {
    error_ = "needs root to make a cgroup (write access to the cgroup2 hierarchy)";
    return;
  }
  const std::string& mount = Cgroup2Mount();
  if (mount.empty()) {
    error_ = "needs a cgroup2 mount (none in /proc/self/mounts)";
    return;
  }
  const std::string parent = absl::StrCat("/ringside-test-", getpid());
  path_ = absl::StrCat(parent, "/", leaf);
  parent_dir_ = mount + parent;
  dir_ = mount + path_;
  for (const std::string& d : {parent_dir_, dir_}) {
    if (d == dir_ && !make_leaf) return;
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      error_ = absl::StrCat("mkdir ", d, ": ", std::strerror(errno));
      return;
    }
  }
  struct stat st;
  if (stat(dir_.c_str(), &st) != 0) {
    error_ = absl::StrCat("stat ", dir_, ": ", std::strerror(errno));
    return;
  }
  id_ = static_cast<uint64_t>(st.st_ino);
}

ScratchCgroup::~ScratchCgroup() {
  if (dir_.empty()) return;
  // Tasks still inside go back where this process is.
  const std::optional<std::string> own = CgroupPathOfPid(getpid());
  const std::string home = Cgroup2Mount() + (own.has_value() ? *own : "/");
  for (int attempt = 0; attempt < 50; attempt++) {
    std::ifstream procs(dir_ + "/cgroup.procs");
    std::string pid;
    while (procs >> pid) std::ofstream(home + "/cgroup.procs") << pid << "\n";
    if (rmdir(dir_.c_str()) == 0 || errno == ENOENT) break;
    usleep(20'000);  // A task on its way out.
  }
  rmdir(parent_dir_.c_str());
}

}  // namespace ringside::agent::testing
