#include "agent/descriptors/cgroup_fs.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::agent {
bool HasDotDot(std::string_view path) {
  for (absl::string_view part : absl::StrSplit(absl::string_view(path.data(), path.size()), '/')) {
    if (part == "..") return true;
  }
  return false;
}

namespace {

constexpr int kMaxDepth = 64;

// Returns false once `budget` is used up.
bool Walk(const std::string& dir, const std::string& path, int depth, size_t* budget,
          const std::function<void(const std::string&, uint64_t)>& visit) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return true;  // Removed meanwhile.
  bool complete = true;
  while (dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR) continue;
    const absl::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (*budget == 0) {
      complete = false;
      break;
    }
    --*budget;
    const std::string child = absl::StrCat(path == "/" ? "" : path, "/", name);
    // kernfs hands out a cgroup's id as its inode number, here as in stat().
    visit(child, static_cast<uint64_t>(e->d_ino));
    if (depth + 1 < kMaxDepth &&
        !Walk(absl::StrCat(dir, "/", name), child, depth + 1, budget, visit)) {
      complete = false;
      break;
    }
  }
  closedir(d);
  return complete;
}

}  // namespace

const std::string& Cgroup2Mount() {
  static const std::string* mount = [] {
    std::ifstream mounts("/proc/self/mounts");
    std::string line;
    while (std::getline(mounts, line)) {
      const std::vector<std::string> f = absl::StrSplit(line, ' ');
      if (f.size() >= 3 && f[2] == "cgroup2") return new std::string(f[1]);
    }
    return new std::string();
  }();
  return *mount;
}

std::optional<std::string> CgroupPathInProcFile(std::string_view contents_std) {
  const absl::string_view contents(contents_std.data(), contents_std.size());
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    if (!absl::ConsumePrefix(&line, "0::")) continue;
    absl::ConsumeSuffix(&line, " (deleted)");
    if (line.empty() || line[0] != '/') return std::nullopt;
    return std::string(line);
  }
  return std::nullopt;
}

namespace {

// The path /proc/PID/cgroup shows, relative to this process's namespace.
std::optional<std::string> NamespacePathOfPid(int32_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cgroup"), std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return CgroupPathInProcFile(s.str());
}

size_t Depth(absl::string_view path) {
  return static_cast<size_t>(std::count(path.begin(), path.end(), '/')) - (path == "/" ? 1 : 0);
}

bool ListsPid(const std::string& cgroup_path, int32_t pid) {
  std::ifstream procs(absl::StrCat(Cgroup2Mount(), cgroup_path, "/cgroup.procs"));
  int32_t listed = 0;
  while (procs >> listed) {
    if (listed == pid) return true;
  }
  return false;
}

std::optional<std::string> FindNamespaceRoot() {
  const std::optional<std::string> self = NamespacePathOfPid(getpid());
  const std::optional<std::string> init = NamespacePathOfPid(1);
  // Inside the node's namespace, or pid 1 inside ours (no hostPID): paths
  // need no change.
  if (!self.has_value() || !init.has_value() || *self != "/" || !absl::StartsWith(*init, "/..")) {
    return std::string("/");
  }
  size_t climbs = 0;
  for (absl::string_view part : absl::StrSplit(*init, '/', absl::SkipEmpty())) {
    if (part != "..") break;
    climbs++;
  }
  std::optional<std::string> root;
  const int32_t pid = getpid();
  ForEachCgroup(
      [&](const std::string& path, uint64_t) {
        if (!root.has_value() && Depth(path) >= climbs && ListsPid(path, pid)) root = path;
      },
      kMaxCgroupsSearched);
  return root;
}

}  // namespace

std::string JoinCgroupPath(std::string_view root_std, std::string_view ns_path_std) {
  std::vector<absl::string_view> parts;
  for (absl::string_view path : {absl::string_view(root_std.data(), root_std.size()),
                                 absl::string_view(ns_path_std.data(), ns_path_std.size())}) {
    for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
      if (part == ".") continue;
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
        continue;
      }
      parts.push_back(part);
    }
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

const std::optional<std::string>& CgroupNamespaceRoot() {
  static const std::optional<std::string>* root =
      new std::optional<std::string>(FindNamespaceRoot());
  return *root;
}

std::string CgroupPathBelowMount(std::string_view ns_path) {
  const std::optional<std::string>& root = CgroupNamespaceRoot();
  if (!root.has_value() || *root == "/") return std::string(ns_path);
  return JoinCgroupPath(*root, ns_path);
}

std::optional<std::string> CgroupPathOfPid(int32_t pid) {
  std::optional<std::string> path = NamespacePathOfPid(pid);
  if (!path.has_value()) return std::nullopt;
  return CgroupPathBelowMount(*path);
}

std::optional<uint64_t> CgroupIdOfPath(const std::string& path) {
  const std::string& mount = Cgroup2Mount();
  if (mount.empty() || path.empty() || path[0] != '/' || HasDotDot(path)) return std::nullopt;
  struct stat st;
  if (stat(absl::StrCat(mount, path).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(st.st_ino);
}

bool ForEachCgroup(const std::function<void(const std::string& path, uint64_t id)>& visit,
                   size_t max_cgroups) {
  const std::string& mount = Cgroup2Mount();
  if (mount.empty()) return true;
  if (max_cgroups == 0) return false;
  const std::optional<uint64_t> root = CgroupIdOfPath("/");
  if (!root.has_value()) return true;
  visit("/", *root);
  size_t budget = max_cgroups - 1;
  return Walk(mount, "/", 0, &budget, visit);
}

}  // namespace ringside::agent
