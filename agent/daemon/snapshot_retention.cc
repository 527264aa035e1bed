#include "agent/daemon/snapshot_retention.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringside::agent {
namespace {

constexpr size_t kTimeLength = 16;  // yyyymmddThhmmssZ

struct Snapshot {
  std::string name;
  std::string path;
  uint64_t bytes = 0;
};

}  // namespace

bool IsSnapshotFileName(absl::string_view name, absl::string_view hostname) {
  if (!absl::ConsumePrefix(&name, hostname) || !absl::ConsumePrefix(&name, "-")) return false;
  if (!absl::ConsumeSuffix(&name, ".pftrace")) return false;
  if (name.size() < kTimeLength + 2 || name[kTimeLength] != '-') return false;
  for (size_t i = 0; i < kTimeLength; i++) {
    const char c = name[i];
    const bool ok = i == 8 ? c == 'T' : i == 15 ? c == 'Z' : absl::ascii_isdigit(c);
    if (!ok) return false;
  }
  return true;
}

PruneResult PruneSnapshots(const std::string& dir, absl::string_view hostname, uint32_t max_files,
                           uint64_t max_bytes, const std::string& keep) {
  PruneResult result;
  if (max_files == 0 && max_bytes == 0) return result;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    result.errors.push_back(absl::StrCat(dir, ": ", std::strerror(errno)));
    return result;
  }
  std::vector<Snapshot> snapshots;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!IsSnapshotFileName(name, hostname)) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    snapshots.push_back({name, path, static_cast<uint64_t>(st.st_size)});
  }
  closedir(d);
  // Names sort by time: the hostname is the same, the time comes next.
  std::sort(snapshots.begin(), snapshots.end(),
            [](const Snapshot& a, const Snapshot& b) { return a.name < b.name; });
  uint64_t files = snapshots.size(), bytes = 0;
  for (const Snapshot& s : snapshots) bytes += s.bytes;
  for (const Snapshot& s : snapshots) {
    const bool over = (max_files > 0 && files > max_files) || (max_bytes > 0 && bytes > max_bytes);
    if (!over) break;
    if (s.path == keep) continue;
    if (unlink(s.path.c_str()) != 0) {
      result.errors.push_back(absl::StrCat(s.path, ": ", std::strerror(errno)));
      continue;
    }
    files--;
    bytes -= s.bytes;
    result.files_deleted++;
    result.bytes_deleted += s.bytes;
  }
  return result;
}

}  // namespace ringside::agent
