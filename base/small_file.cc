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
  std::string text;
  size_t used = 0;
  for (;;) {
    // One byte past the limit tells a file of exactly `max_bytes` from a
    // longer one.
    const size_t want = std::min(kChunk, max_bytes + 1 - used);
    text.resize(used + want);
    const ssize_t n = RetryOnEintr([&] { return read(fd.get(), text.data() + used, want); });
    if (n < 0) return ErrnoStatus("reading " + path);
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": longer than the ", max_bytes, " bytes it may take"));
    }
  }
  text.resize(used);
  return text;
}

}  // namespace ringside::base
