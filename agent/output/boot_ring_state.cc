#include "agent/output/boot_ring_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

constexpr size_t kMaxBootId = 64;

}  // namespace

std::optional<std::string> ReadRecordedBoot(const OutputDir& dir) {
  const base::ScopedFd fd(
      openat(dir.fd(), kBootRingStateName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  char buf[kMaxBootId + 2];
  const ssize_t n = base::RetryOnEintr([&] { return read(fd.get(), buf, sizeof(buf)); });
  if (n <= 0 || static_cast<size_t>(n) > kMaxBootId + 1) return std::nullopt;
  std::string id(
      absl::StripTrailingAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
  if (id.empty()) return std::nullopt;
  for (char c : id) {
    if (!absl::ascii_isxdigit(c) && c != '-') return std::nullopt;
  }
  return id;
}

absl::Status WriteRecordedBoot(const OutputDir& dir, const std::string& boot_id) {
  const std::string temp = absl::StrCat(kBootRingStateName, ".new");
  (void)unlinkat(dir.fd(), temp.c_str(), 0);
  const base::ScopedFd fd(
      openat(dir.fd(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return base::ErrnoStatus(absl::StrCat("creating ", dir.Join(temp)));
  if (const base::IoResult w = base::WriteAll(fd.get(), boot_id + "\n"); !w.ok()) {
    (void)unlinkat(dir.fd(), temp.c_str(), 0);
    return base::ErrnoToStatus(w.err, absl::StrCat("writing ", dir.Join(temp)));
  }
  if (renameat(dir.fd(), temp.c_str(), dir.fd(), kBootRingStateName) != 0) {
    const absl::Status st =
        base::ErrnoStatus(absl::StrCat("renaming to ", dir.Join(kBootRingStateName)));
    (void)unlinkat(dir.fd(), temp.c_str(), 0);
    return st;
  }
  return absl::OkStatus();
}

}  // namespace ringside::agent
