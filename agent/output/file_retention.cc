#include "agent/output/file_retention.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/output/trace_sidecar.h"
#include "base/dir_stream.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

constexpr size_t kTimeLength = 16;  // yyyymmddThhmmssZ

std::string SafeHost(absl::string_view hostname) {
  std::string host;
  for (char c : hostname) host.push_back(c == '/' || (host.empty() && c == '.') ? '_' : c);
  return host;
}

// "<time>-<rest>" of a name "<SafeHost(hostname)>-<time>-<rest>.pftrace".
std::optional<absl::string_view> TimeAndRestOf(absl::string_view name, absl::string_view hostname) {
  if (!absl::ConsumePrefix(&name, SafeHost(hostname)) || !absl::ConsumePrefix(&name, "-")) {
    return std::nullopt;
  }
  if (!absl::EndsWith(name, ".pftrace")) return std::nullopt;
  const absl::string_view time_and_rest = name;
  absl::ConsumeSuffix(&name, ".pftrace");
  if (name.size() < kTimeLength + 2 || name[kTimeLength] != '-') return std::nullopt;
  for (size_t i = 0; i < kTimeLength; i++) {
    const char c = name[i];
    const bool ok = i == 8 ? c == 'T' : i == 15 ? c == 'Z' : absl::ascii_isdigit(c);
    if (!ok) return std::nullopt;
  }
  return time_and_rest;
}

struct File {
  std::string name;
  int rank = 0;
  std::string age;  // "<time>-<rest>" of the name, which sorts by time; else the name.
  uint64_t bytes = 0;
};

}  // namespace

std::string LocalHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string AgentFileStem(absl::string_view hostname, absl::Time when) {
  return absl::StrCat(SafeHost(hostname), "-",
                      absl::FormatTime("%Y%m%dT%H%M%SZ", when, absl::UTCTimeZone()));
}

FileHost::FileHost(absl::string_view name, absl::string_view earlier)
    : name_(name), earlier_(earlier == name ? absl::string_view() : earlier) {}

FileHost FileHost::Local(absl::string_view machine_name) {
  if (machine_name.empty()) return FileHost(LocalHostname());
  return FileHost(machine_name, LocalHostname());
}

std::optional<absl::string_view> FileHost::TimeAndRest(absl::string_view file) const {
  std::optional<absl::string_view> found = TimeAndRestOf(file, name_);
  if (!found.has_value() && !earlier_.empty()) found = TimeAndRestOf(file, earlier_);
  return found;
}

std::optional<absl::string_view> AgentFileRest(absl::string_view name, const FileHost& host) {
  std::optional<absl::string_view> rest = host.TimeAndRest(name);
  if (!rest.has_value()) return std::nullopt;
  rest->remove_prefix(kTimeLength + 1);
  absl::ConsumeSuffix(&*rest, ".pftrace");
  return rest;
}

PruneResult PruneOldestFiles(const OutputDir& dir, const FileHost& host, const FileRank& rank,
                             uint32_t max_files, uint64_t max_bytes, const std::string& keep,
                             std::optional<FileJoining> joining) {
  PruneResult result;
  if (max_files == 0 && max_bytes == 0) return result;
  const base::DirStream d = base::OpenDirStream(dir.fd());
  if (d == nullptr) {
    result.errors.push_back(absl::StrCat(dir.path(), ": ", std::strerror(errno)));
    return result;
  }
  std::vector<File> files;
  while (dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    const std::optional<int> r = rank(name);
    if (!r.has_value()) continue;
    struct stat st;
    if (fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    files.push_back({name, *r, std::string(host.TimeAndRest(name).value_or(name)),
                     static_cast<uint64_t>(st.st_size)});
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.age != b.age ? a.age < b.age : a.name < b.name;
  });
  uint64_t count = files.size(), bytes = 0;
  for (const File& f : files) bytes += f.bytes;
  if (joining.has_value()) {
    count++;
    bytes += joining->bytes;
  }
  for (const File& f : files) {
    const bool over = (max_files > 0 && count > max_files) || (max_bytes > 0 && bytes > max_bytes);
    if (!over) break;
    if (f.name == keep) continue;
    // Its sidecar first: a trace without one is unfinished to a shipper,
    // while a sidecar without its trace would describe nothing. One a
    // killed agent left half written goes too.
    unlinkat(dir.fd(), SidecarTempName(f.name).c_str(), 0);
    if (unlinkat(dir.fd(), SidecarName(f.name).c_str(), 0) != 0 && errno != ENOENT) {
      result.errors.push_back(
          absl::StrCat(dir.Join(SidecarName(f.name)), ": ", std::strerror(errno)));
      continue;
    }
    if (unlinkat(dir.fd(), f.name.c_str(), 0) != 0) {
      if (errno == ENOENT) {
        // Taken since the listing (a shipper claims a trace, then its
        // sidecar, and drops a trace whose sidecar is gone): it left the
        // directory all the same.
        count--;
        bytes -= f.bytes;
        continue;
      }
      result.errors.push_back(absl::StrCat(dir.Join(f.name), ": ", std::strerror(errno)));
      continue;
    }
    count--;
    bytes -= f.bytes;
    result.files_deleted++;
    result.bytes_deleted += f.bytes;
  }
  return result;
}

}  // namespace ringside::agent
