#include "agent/tracefile/trace_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"

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
  const base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  absl::Status status = WriteHeader(name, size, st.st_mtim.tv_sec);
  std::string buffer(kCopyBytes, '\0');
  uint64_t copied = 0;
  while (status.ok() && copied < size) {
    const ssize_t n = base::RetryOnEintr([&] {
      return read(fd.get(), buffer.data(),
                  static_cast<size_t>(std::min<uint64_t>(kCopyBytes, size - copied)));
    });
    if (n <= 0) {
      status = absl::DataLossError(absl::StrCat(
          path, n < 0 ? absl::StrCat(": ", std::strerror(errno))
                      : absl::StrCat(" shrank while read: ", copied, " of ", size, " bytes")));
      break;
    }
    status = out_->Write(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    copied += static_cast<uint64_t>(n);
  }
  return status.ok() ? WritePadding(size) : status;
}

absl::Status TarWriter::Finish() {
  static const char kEnd[2 * kBlock] = {};
  if (absl::Status st = out_->Write(absl::string_view(kEnd, sizeof(kEnd))); !st.ok()) return st;
  return out_->Finish();
}

namespace {

// An octal field of a header (NUL- or space-terminated, maybe
// space-padded), or GNU's base-256 form for large sizes; nullopt when it is
// neither.
std::optional<uint64_t> ParseOctal(std::string_view field) {
  if (!field.empty() && (static_cast<unsigned char>(field[0]) & 0x80) != 0) {
    uint64_t value = static_cast<unsigned char>(field[0]) & 0x7f;
    for (size_t i = 1; i < field.size(); i++) {
      if (value >> 55 != 0) return std::nullopt;
      value = value << 8 | static_cast<unsigned char>(field[i]);
    }
    return value;
  }
  size_t i = 0;
  while (i < field.size() && field[i] == ' ') i++;
  uint64_t value = 0;
  bool digits = false;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; i++) {
    if (value >> 60 != 0) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  if (i < field.size() && field[i] != '\0' && field[i] != ' ') return std::nullopt;
  return digits ? std::optional<uint64_t>(value) : std::nullopt;
}

std::string CString(std::string_view field) {
  return std::string(field.substr(0, field.find('\0')));
}

}  // namespace

bool IsTarHeader(std::string_view block) {
  if (block.size() < kBlock) return false;
  if (block.substr(257, 5) != "ustar") return false;
  const std::optional<uint64_t> stored = ParseOctal(block.substr(148, 8));
  if (!stored.has_value()) return false;
  // Old writers summed signed chars: either sum is taken.
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; i++) {
    const char c = i >= 148 && i < 156 ? ' ' : block[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

absl::StatusOr<std::vector<TarMember>> ReadTarMembers(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::vector<TarMember> members;
  std::string long_name;  // A GNU 'L' entry's, for the member after it.
  char block[kBlock];
  for (uint64_t at = 0;;) {
    if (file_size - at < kBlock) {
      return absl::DataLossError(absl::StrCat(path, ": the TAR archive ends at byte ", at,
                                              " without its end-of-archive blocks"));
    }
    const ssize_t n = pread(fd, block, kBlock, static_cast<off_t>(at));
    if (n != static_cast<ssize_t>(kBlock)) {
      return absl::UnavailableError(absl::StrCat(path, ": reading byte ", at, ": ",
                                                 n < 0 ? std::strerror(errno) : "short read"));
    }
    const std::string_view header(block, kBlock);
    if (header.find_first_not_of('\0') == std::string_view::npos) return members;
    if (!IsTarHeader(header)) {
      return absl::DataLossError(
          absl::StrCat(path, ": byte ", at, ": not a TAR header (its checksum does not add up)"));
    }
    const std::optional<uint64_t> size = ParseOctal(header.substr(124, 12));
    const uint64_t data = at + kBlock;
    if (!size.has_value() || *size > file_size - data) {
      return absl::DataLossError(absl::StrCat(path, ": byte ", at, ": a member of ",
                                              size.has_value() ? absl::StrCat(*size) : "no",
                                              " bytes, past the end of the archive"));
    }
    const char type = header[156];
    if (type == 'L') {
      std::string name(static_cast<size_t>(std::min<uint64_t>(*size, 4096)), '\0');
      if (pread(fd, name.data(), name.size(), static_cast<off_t>(data)) !=
          static_cast<ssize_t>(name.size())) {
        return absl::UnavailableError(absl::StrCat(path, ": reading byte ", data));
      }
      long_name = CString(name);
    } else if (type == '0' || type == '\0' || type == '7') {
      TarMember m;
      if (!long_name.empty()) {
        m.name = std::move(long_name);
      } else {
        const std::string prefix = CString(header.substr(345, 155));
        m.name = CString(header.substr(0, 100));
        if (!prefix.empty()) m.name = absl::StrCat(prefix, "/", m.name);
      }
      long_name.clear();
      m.offset = data;
      m.size = *size;
      members.push_back(std::move(m));
    } else {
      long_name.clear();
    }
    at = data + (*size + kBlock - 1) / kBlock * kBlock;
    if (at > file_size) at = file_size;
  }
}

}  // namespace ringside::agent
