#include "agent/files/trace_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

constexpr uint64_t kPacketTag =
    buffer::MakeTag(buffer::kTracePacketFieldNumber, buffer::WireType::kLengthDelimited);

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceFileReader>> TraceFileReader::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever,
  // before fstat could tell that it is not a regular file. Regular files
  // ignore the flag, so reads still block as usual.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  std::FILE* file = fdopen(fd, "rb");
  if (file == nullptr) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("cannot open ", path));
  }
  return std::unique_ptr<TraceFileReader>(
      new TraceFileReader(file, static_cast<uint64_t>(st.st_size)));
}

TraceFileReader::~TraceFileReader() { std::fclose(file_); }

TraceFileReader::Result TraceFileReader::Fail(uint64_t offset, std::string message) {
  done_ = true;
  final_result_ = Result::kError;
  error_offset_ = offset;
  error_ = std::move(message);
  return Result::kError;
}

bool TraceFileReader::ReadVarint(const char* what, uint64_t* value, bool* clean_eof) {
  const uint64_t start = position_;
  buffer::VarIntDecoder decoder;
  for (;;) {
    const int c = getc_unlocked(file_);
    if (c == EOF) {
      if (decoder.size() == 0 && clean_eof != nullptr) {
        *clean_eof = true;
        return false;
      }
      Fail(start, absl::StrFormat("truncated file: it ends inside the %s varint", what));
      return false;
    }
    position_++;
    switch (decoder.Feed(static_cast<uint8_t>(c))) {
      case buffer::VarIntDecoder::State::kNeedMore:
        break;
      case buffer::VarIntDecoder::State::kDone:
        *value = decoder.value();
        return true;
      case buffer::VarIntDecoder::State::kOverlong:
        Fail(start, absl::StrFormat("corrupt %s: varint longer than %u bytes", what,
                                    buffer::kMaxVarIntSize));
        return false;
    }
  }
}

TraceFileReader::Result TraceFileReader::ReadNextPacket(std::string* packet, uint64_t* offset) {
  if (done_) return final_result_;
  const uint64_t packet_offset = position_;

  uint64_t tag = 0;
  bool clean_eof = false;
  if (!ReadVarint("packet tag", &tag, &clean_eof)) {
    if (clean_eof) {
      done_ = true;
      final_result_ = Result::kEnd;
      return Result::kEnd;
    }
    return Result::kError;
  }
  if (tag != kPacketTag) {
    return Fail(
        packet_offset,
        absl::StrFormat("not a trace packet: expected tag 0x0a (field 1, length-delimited), "
                        "found field %u wire type %u",
                        buffer::TagFieldNumber(tag), buffer::TagWireType(tag)));
  }

  uint64_t size = 0;
  if (!ReadVarint("packet length", &size, nullptr)) return Result::kError;
  if (size > kMaxPacketBytes) {
    return Fail(packet_offset, absl::StrFormat("corrupt packet length: %u bytes (limit %u)", size,
                                               kMaxPacketBytes));
  }

  // Refuse a length the file cannot hold before allocating for it. The file
  // may be growing (a trace being streamed), so look at its size again first.
  if (size > file_size_ - std::min(position_, file_size_)) {
    struct stat st;
    if (fstat(fileno(file_), &st) == 0) file_size_ = static_cast<uint64_t>(st.st_size);
    const uint64_t remaining = file_size_ - std::min(position_, file_size_);
    if (size > remaining) {
      return Fail(packet_offset, absl::StrFormat("truncated packet: it declares %u bytes but the "
                                                 "file ends after %u",
                                                 size, remaining));
    }
  }

  packet->resize(size);
  size_t got = size == 0 ? 0 : std::fread(packet->data(), 1, size, file_);
  position_ += got;
  if (got != size) {
    return Fail(packet_offset,
                absl::StrFormat("truncated packet: it declares %u bytes but the file ends after %u",
                                size, got));
  }
  *offset = packet_offset;
  return Result::kPacket;
}

}  // namespace ringside::agent
