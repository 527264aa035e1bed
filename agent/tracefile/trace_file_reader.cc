#include "agent/tracefile/trace_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/tracefile/trace_archive.h"
#include "base/scoped_fd.h"
#include "base/status.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

constexpr uint64_t kPacketTag =
    buffer::MakeTag(buffer::kTracePacketFieldNumber, buffer::WireType::kLengthDelimited);

}  // namespace

absl::StatusOr<std::unique_ptr<TraceFileReader>> TraceFileReader::Open(const std::string& path) {
  if (path == kStandardInput) {
    // At a terminal the reader would wait for a trace nobody is going to type.
    if (isatty(STDIN_FILENO)) {
      return absl::FailedPreconditionError(
          "standard input is a terminal: pipe a trace in (ringside inspect - < trace.pftrace)");
    }
    // A copy, so that closing the reader leaves standard input open.
    base::ScopedFd fd(fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0));
    if (!fd.valid()) return base::ErrnoToStatus(errno, "cannot read standard input");
    return FromFd(std::move(fd), /*size_known=*/false, 0, path);
  }
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever,
  // before fstat could tell that it is not a regular file. Regular files
  // ignore the flag, so reads still block as usual.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return base::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  return OpenFile(fd, path);
}

absl::StatusOr<std::unique_ptr<TraceFileReader>> TraceFileReader::OpenFile(
    int fd, const std::string& path) {
  base::ScopedFd owned(fd);
  struct stat st;
  if (fstat(owned.get(), &st) != 0) {
    return base::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a regular file (to read a pipe, give - and pipe the trace in)"));
  }
  return FromFd(std::move(owned), /*size_known=*/true, static_cast<uint64_t>(st.st_size), path);
}

absl::StatusOr<std::unique_ptr<TraceFileReader>> TraceFileReader::OpenRange(int fd,
                                                                            const std::string& path,
                                                                            uint64_t offset,
                                                                            uint64_t size) {
  base::ScopedFd owned(fd);
  struct stat st;
  if (fstat(owned.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      offset > static_cast<uint64_t>(st.st_size) ||
      size > static_cast<uint64_t>(st.st_size) - offset ||
      lseek(owned.get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": no ", size, " bytes at offset ", offset, " of a regular file"));
  }
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader =
      FromFd(std::move(owned), /*size_known=*/true, size, path);
  if (reader.ok()) {
    (*reader)->is_range_ = true;
    (*reader)->range_offset_ = offset;
  }
  return reader;
}

uint64_t TraceFileReader::stored_position() const {
  if (!compressed_) return position_;
  const z_off_t at = gzoffset(file_);
  return at < 0 ? 0 : static_cast<uint64_t>(at);
}

absl::StatusOr<std::unique_ptr<TraceFileReader>> TraceFileReader::FromFd(base::ScopedFd owned,
                                                                         bool size_known,
                                                                         uint64_t file_size,
                                                                         const std::string& path) {
  gzFile file = gzdopen(owned.get(), "rb");
  if (file == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot read ", path, ": out of memory"));
  }
  const int fd = owned.release();  // gzclose() closes it.
  // Before gzdirect(), which reads the first bytes into buffers of this size.
  gzbuffer(file, 128 << 10);
  auto reader =
      std::unique_ptr<TraceFileReader>(new TraceFileReader(file, fd, size_known, file_size));
  // zlib knows gzip by its magic bytes and reads anything else as it is.
  reader->compressed_ = gzdirect(file) == 0;
  return reader;
}

TraceFileReader::~TraceFileReader() { gzclose(file_); }

TraceFileReader::Result TraceFileReader::Fail(uint64_t offset, std::string message) {
  done_ = true;
  final_result_ = Result::kError;
  error_offset_ = offset;
  error_ = std::move(message);
  return Result::kError;
}

std::string TraceFileReader::GzipError() {
  int errnum = Z_OK;
  std::string message = gzerror(file_, &errnum);
  if (errnum == Z_OK) return "";
  // zlib names the file "<fd:N>", which tells the user nothing.
  if (absl::StartsWith(message, "<fd:")) {
    const size_t colon = message.find(": ");
    if (colon != std::string::npos) message = message.substr(colon + 2);
  }
  const std::string where =
      absl::StrFormat("compressed byte offset %d", static_cast<int64_t>(gzoffset(file_)));
  switch (errnum) {
    case Z_ERRNO:
      return absl::StrCat("read failed: ", message);
    case Z_MEM_ERROR:
      return "out of memory decompressing gzip data";
    case Z_BUF_ERROR:
      return absl::StrCat("truncated gzip data: it ends at ", where, " (", message, ")");
    default:
      return absl::StrCat("corrupt gzip data near ", where, ": ", message);
  }
}

int TraceFileReader::ReadByte() {
  int c = gzgetc(file_);
  if (c != -1 || !GzipError().empty()) return c;
  // The end of the data so far: a file being streamed may have grown since.
  gzclearerr(file_);
  return gzgetc(file_);
}

uint64_t TraceFileReader::ReadInto(std::string* out, uint64_t size) {
  constexpr uint64_t kMinGrowthBytes = 64 << 10;
  out->clear();
  uint64_t got = 0;
  bool looked_again = false;
  while (got < size) {
    const uint64_t want = std::min(size - got, std::max(got, kMinGrowthBytes));
    out->resize(got + want);
    const int n = gzread(file_, out->data() + got, static_cast<unsigned>(want));
    if (n > 0) {
      got += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 || looked_again || !GzipError().empty()) break;
    // As in ReadByte(): a file being streamed may have grown.
    gzclearerr(file_);
    looked_again = true;
  }
  out->resize(got);
  return got;
}

bool TraceFileReader::ReadVarint(const char* what, uint64_t* value, bool* clean_eof) {
  const uint64_t start = position_;
  buffer::VarIntDecoder decoder;
  for (;;) {
    const int c = ReadByte();
    if (c == -1) {
      if (std::string gzip_error = GzipError(); !gzip_error.empty()) {
        Fail(position_, std::move(gzip_error));
        return false;
      }
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
  if (inflated_at_ < inflated_.size()) return NextInflatedPacket(packet, offset);
  // A loop, not recursion: a file of empty compressed packets is as long as
  // it likes.
  for (;;) {
    const Result result = ReadFilePacket(packet, offset);
    if (result != Result::kPacket) return result;
    const std::optional<CompressedPayload> payload = FindCompressedPayload(*packet);
    if (!payload.has_value()) return result;
    const char* codec = PacketCodecName(payload->codec);
    (payload->codec == PacketCodec::kZstd ? compression_stats_.zstd_packets
                                          : compression_stats_.deflate_packets)++;
    compression_stats_.compressed_bytes += payload->data.size();
    if (absl::Status st = InflatePayload(*payload, kMaxInflatedBytes, &inflated_); !st.ok()) {
      inflated_.clear();
      return Fail(*offset, absl::StrCat("compressed packet (", codec, "): ", st.message()));
    }
    compression_stats_.inflated_bytes += inflated_.size();
    inflated_at_ = 0;
    inflated_offset_ = *offset;
    inflated_codec_ = payload->codec;
    if (!inflated_.empty()) return NextInflatedPacket(packet, offset);
  }
}

TraceFileReader::Result TraceFileReader::NextInflatedPacket(std::string* packet, uint64_t* offset) {
  const auto* begin = reinterpret_cast<const uint8_t*>(inflated_.data());
  const uint8_t* p = begin + inflated_at_;
  const uint8_t* end = begin + inflated_.size();
  buffer::Field field;
  if (!buffer::ReadField(&p, end, &field) || field.number != buffer::kTracePacketFieldNumber ||
      field.type != buffer::WireType::kLengthDelimited) {
    return Fail(inflated_offset_,
                absl::StrFormat("compressed packet (%s): not a whole trace packet at byte %u of "
                                "the %u it inflated to",
                                PacketCodecName(inflated_codec_), inflated_at_, inflated_.size()));
  }
  if (FindCompressedPayload(field.bytes).has_value()) {
    return Fail(inflated_offset_,
                absl::StrCat("compressed packet (", PacketCodecName(inflated_codec_),
                             "): it holds another compressed packet"));
  }
  packet->assign(field.bytes.data(), field.bytes.size());
  inflated_at_ = static_cast<size_t>(p - begin);
  if (inflated_at_ == inflated_.size()) {
    inflated_.clear();
    inflated_at_ = 0;
  }
  *offset = inflated_offset_;
  return Result::kPacket;
}

TraceFileReader::Result TraceFileReader::FailNotATrace(uint64_t tag) {
  // Not a trace at all: say what it is rather than which field it began
  // with.
  not_a_trace_ = true;
  std::string head(512, '\0');
  const ssize_t n = size_known_ && !compressed_
                        ? pread(fd_, head.data(), head.size(), static_cast<off_t>(range_offset_))
                        : -1;
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (std::optional<std::string> what = DescribeNotATrace(head); what.has_value()) {
    return Fail(0, absl::StrCat("not a Perfetto trace: it is ", *what));
  }
  return Fail(0, absl::StrFormat("not a Perfetto trace: it does not begin with a packet (tag "
                                 "0x0a), but with field %u wire type %u",
                                 buffer::TagFieldNumber(tag), buffer::TagWireType(tag)));
}

TraceFileReader::Result TraceFileReader::ReadFilePacket(std::string* packet, uint64_t* offset) {
  const uint64_t packet_offset = position_;
  // A range (a TAR member) ends at its size, padding and the next member
  // after it.
  if (is_range_ && !compressed_ && position_ >= file_size_) {
    done_ = true;
    final_result_ = Result::kEnd;
    return Result::kEnd;
  }

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
  if (tag != kPacketTag && packet_offset == 0) return FailNotATrace(tag);
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
  // Compressed data and pipes have no such size: ReadInto() grows the packet
  // only as its bytes come instead.
  if (size_known_ && !compressed_ && size > file_size_ - std::min(position_, file_size_)) {
    struct stat st;
    if (!is_range_ && fstat(fd_, &st) == 0) file_size_ = static_cast<uint64_t>(st.st_size);
    const uint64_t remaining = file_size_ - std::min(position_, file_size_);
    if (size > remaining) {
      return Fail(packet_offset, absl::StrFormat("truncated packet: it declares %u bytes but the "
                                                 "file ends after %u",
                                                 size, remaining));
    }
  }

  const uint64_t got = ReadInto(packet, size);
  position_ += got;
  if (got != size) {
    if (std::string gzip_error = GzipError(); !gzip_error.empty()) {
      return Fail(position_, std::move(gzip_error));
    }
    return Fail(packet_offset,
                absl::StrFormat("truncated packet: it declares %u bytes but the file ends after %u",
                                size, got));
  }
  *offset = packet_offset;
  return Result::kPacket;
}

std::optional<std::string> DescribeNotATrace(std::string_view head) {
  if (head.empty() || head[0] == '\x0a' || head.starts_with("\x1f\x8b")) return std::nullopt;
  if (IsTarHeader(head)) {
    return "a TAR archive (what `ringside merge` writes: `ringside inspect` summarizes its "
           "members)";
  }
  struct Magic {
    std::string_view bytes;
    const char* what;
  };
  static constexpr Magic kMagics[] = {
      {"\x28\xb5\x2f\xfd", "zstd-compressed data: decompress it first (zstd -d)"},
      {"\xfd"
       "7zXZ",
       "xz-compressed data: decompress it first (xz -d)"},
      {"BZh", "bzip2-compressed data: decompress it first (bzip2 -d)"},
      {"PK\x03\x04", "a ZIP archive"},
      {"\x7f"
       "ELF",
       "an ELF program or library"},
  };
  for (const Magic& m : kMagics) {
    if (head.starts_with(m.bytes)) return m.what;
  }
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (head[first] == '{' || head[first] == '[')) {
    return "JSON text";
  }
  bool text = true;
  for (char c : head) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 && c != '\n' && c != '\t' && c != '\r') text = false;
  }
  if (text) return "text";
  std::string bytes;
  for (size_t i = 0; i < head.size() && i < 8; i++) {
    absl::StrAppendFormat(&bytes, "%s%02x", i ? " " : "", static_cast<unsigned char>(head[i]));
  }
  return absl::StrCat("data of an unknown kind (it begins with bytes ", bytes, ")");
}

}  // namespace ringside::agent
