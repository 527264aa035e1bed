#include "agent/files/trace_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::agent {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kCopyBytes = 1 << 20;

// `value` in octal, zero-padded, in the `width` bytes at `field` (the last
// one NUL).
void Octal(char* field, size_t width, uint64_t value) {
  const std::string digits = absl::StrFormat("%0*o", static_cast<int>(width - 1), value);
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

}  // namespace

absl::Status TarWriter::WriteHeader(const std::string& name, uint64_t size, int64_t mtime_s) {
  if (name.empty() || name.size() > 100 || name.find('/') != std::string::npos || name == "." ||
      name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' cannot be a member's name: 1 to 100 bytes, no '/'"));
  }
  if (size > kMaxMemberBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", size, " bytes: a TAR member holds at most 8 GiB"));
  }
  char h[kBlock] = {};
  std::memcpy(h, name.data(), name.size());  // name[100]
  Octal(h + 100, 8, 0644);                   // mode
  Octal(h + 108, 8, 0);                      // uid
  Octal(h + 116, 8, 0);                      // gid
  Octal(h + 124, 12, size);                  // size
  // 11 octal digits (until the year 2242): a time past them is clamped.
  Octal(h + 136, 12,
        std::min<uint64_t>(static_cast<uint64_t>(mtime_s > 0 ? mtime_s : 0),
                           (uint64_t{1} << 33) - 1));
  std::memset(h + 148, ' ', 8);  // The checksum counts its own field as spaces.
  h[156] = '0';                  // typeflag: a regular file.
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 265, "root", 4);  // uname
  std::memcpy(h + 297, "root", 4);  // gname
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  const std::string checksum = absl::StrFormat("%06o", sum);
  std::memcpy(h + 148, checksum.data(), 6);
  h[154] = '\0';
  h[155] = ' ';
  return out_->Write(absl::string_view(h, kBlock));
}

absl::Status TarWriter::WritePadding(uint64_t size) {
  static const char kZeros[kBlock] = {};
  const size_t pad = (kBlock - size % kBlock) % kBlock;
  return pad == 0 ? absl::OkStatus() : out_->Write(absl::string_view(kZeros, pad));
}

absl::Status TarWriter::AddFile(const std::string& name, absl::string_view contents,
                                int64_t mtime_s) {
  if (absl::Status st = WriteHeader(name, contents.size(), mtime_s); !st.ok()) return st;
  if (absl::Status st = out_->Write(contents); !st.ok()) return st;
  return WritePadding(contents.size());
}

absl::Status TarWriter::AddFileFrom(const std::string& name, const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  absl::Status status = WriteHeader(name, size, st.st_mtim.tv_sec);
  std::string buffer(kCopyBytes, '\0');
  uint64_t copied = 0;
  while (status.ok() && copied < size) {
    const ssize_t n =
        read(fd, buffer.data(), static_cast<size_t>(std::min<uint64_t>(kCopyBytes, size - copied)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = absl::DataLossError(absl::StrCat(
          path, n < 0 ? absl::StrCat(": ", std::strerror(errno))
                      : absl::StrCat(" shrank while read: ", copied, " of ", size, " bytes")));
      break;
    }
    status = out_->Write(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    copied += static_cast<uint64_t>(n);
  }
  close(fd);
  return status.ok() ? WritePadding(size) : status;
}

absl::Status TarWriter::Finish() {
  static const char kEnd[2 * kBlock] = {};
  if (absl::Status st = out_->Write(absl::string_view(kEnd, sizeof(kEnd))); !st.ok()) return st;
  return out_->Finish();
}

}  // namespace ringside::agent
