#include "base/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::base {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ReadSmallFileOrEmpty(const std::string& path) {
  return ReadSmallFile(path).value_or("");
}

absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  ScopedFd fd(RetryOnEintr([&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC); }));
  if (!fd) return ErrnoStatus("opening " + path);
  // One read() of this much at a time: seq_file (/proc) fills a buffer of
  // the size asked for, and asking for megabytes makes /proc/kallsyms four
  // times slower to read than 64 KiB reads do.
  constexpr size_t kChunk = 64 * 1024;
  // Read into a buffer on the stack, which stays mapped, and appended from
  // there: growing the string by a chunk at a time zero-filled 64 KiB a
  // read, which the allocator gave back to the kernel when the string went,
  // so that each read of a small file (another process's maps, a few KiB)
  // faulted in up to 32 pages again (~11 us each on a VM).
  char chunk[kChunk];
  std::string text;
  for (;;) {
    // One byte past the limit tells a file of exactly `max_bytes` from a
    // longer one.
    const size_t want = std::min(kChunk, max_bytes + 1 - text.size());
    const ssize_t n = RetryOnEintr([&] { return read(fd.get(), chunk, want); });
    if (n < 0) return ErrnoStatus("reading " + path);
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": longer than the ", max_bytes, " bytes it may take"));
    }
  }
  return text;
}

}  // namespace ringside::base
