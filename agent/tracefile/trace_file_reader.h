#ifndef RINGSIDE_AGENT_TRACEFILE_TRACE_FILE_READER_H_
#define RINGSIDE_AGENT_TRACEFILE_TRACE_FILE_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/tracefile/packet_compression.h"
#include "base/scoped_fd.h"
#include "zlib.h"

namespace ringside::agent {

// Reads a trace file (a serialized Trace: a run of `packet` fields, tag 0x0a)
// one packet at a time, so a multi-gigabyte file never sits in memory at once.
// A gzip'd trace (known by its magic bytes, not its name) is decompressed as
// it is read, as trace_processor does; offsets are then in the decompressed
// trace. The reader trusts nothing: every length is checked against what the
// file holds, and the first malformed byte (or the first bad gzip byte) stops
// it with an error that names the byte offset and what was wrong there.
//
// Compressed packets (Perfetto's compressed_packets and
// zstd_compressed_packets, agent/tracefile/packet_compression.h) are replaced
// by the packets inside them, each reported at the compressed packet's
// offset; one that does not inflate, inflates past kMaxInflatedBytes, or
// holds anything but whole packets (another compressed packet included) is
// an error at its offset.
//
// Not thread-safe.
class TraceFileReader {
 public:
  // Packets larger than this are taken as corruption rather than allocated.
  static constexpr uint64_t kMaxPacketBytes = 256ull << 20;

  enum class Result {
    kPacket,  // *packet holds the next packet's bytes.
    kEnd,     // The file ended cleanly at a packet boundary.
    kError,   // Malformed or truncated data; see error() and error_offset().
  };

  // The path that names standard input, which may be a pipe.
  static constexpr char kStandardInput[] = "-";

  // Opens `path`, or reads standard input if it is kStandardInput. Fails with
  // kNotFound / kPermissionDenied / kFailedPrecondition (not a regular file)
  // naming the path and the cause; kFailedPrecondition too if standard input
  // is a terminal.
  static absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(const std::string& path);
  // The same for a file the caller opened (say, relative to a directory's
  // descriptor, never through a symlink): takes `fd` over, closed on
  // failure too. `path` names it in errors.
  static absl::StatusOr<std::unique_ptr<TraceFileReader>> OpenFile(int fd, const std::string& path);
  // The trace in the `size` bytes at `offset` of the regular file `fd` (a
  // TAR archive's member): offsets are then from `offset`, and the trace
  // ends at `size` bytes (a gzip'd one at its gzip stream's end). Takes
  // `fd` over, closed on failure too.
  static absl::StatusOr<std::unique_ptr<TraceFileReader>> OpenRange(int fd, const std::string& path,
                                                                    uint64_t offset, uint64_t size);

  // Reads the next packet into *packet (its serialized TracePacket bytes) and
  // its byte offset in the file (of the packet's tag) into *offset.
  // After kEnd or kError, every later call returns the same result.
  Result ReadNextPacket(std::string* packet, uint64_t* offset);

  // The compressed packets read so far, by codec, and their bytes: the
  // compressed payloads and the packets they inflated to.
  struct CompressionStats {
    uint64_t deflate_packets = 0;
    uint64_t zstd_packets = 0;
    uint64_t compressed_bytes = 0;
    uint64_t inflated_bytes = 0;
  };
  const CompressionStats& compression_stats() const { return compression_stats_; }

  // Why the last ReadNextPacket() returned kError, e.g. "truncated packet: ...".
  const std::string& error() const { return error_; }
  // Set with kError when the data is not a trace at all (its first bytes
  // are no packet): error() then says what it is instead ("not a Perfetto
  // trace: it is a TAR archive ...").
  bool not_a_trace() const { return not_a_trace_; }
  // The byte offset at which the problem was found.
  uint64_t error_offset() const { return error_offset_; }
  // Bytes consumed so far (the offset of the next packet).
  uint64_t position() const { return position_; }
  // Size of the file when it was opened (compressed, for a gzip'd file);
  // 0 for standard input.
  uint64_t file_size() const { return file_size_; }
  // A gzip'd file: the compressed bytes read so far (what the file held of
  // the trace read, to the end of the read-ahead); else position().
  bool gzipped() const { return compressed_; }
  uint64_t stored_position() const;

  ~TraceFileReader();
  TraceFileReader(const TraceFileReader&) = delete;
  TraceFileReader& operator=(const TraceFileReader&) = delete;

 private:
  TraceFileReader(gzFile file, int fd, bool size_known, uint64_t file_size)
      : file_(file), fd_(fd), size_known_(size_known), file_size_(file_size) {}
  // Takes `owned` over, closed on failure too.
  static absl::StatusOr<std::unique_ptr<TraceFileReader>> FromFd(base::ScopedFd owned,
                                                                 bool size_known,
                                                                 uint64_t file_size,
                                                                 const std::string& path);

  // Reads a base-128 varint at position_. Returns false (and sets the error)
  // on EOF or on a varint longer than 10 bytes. `what` names the field for the
  // error message.
  bool ReadVarint(const char* what, uint64_t* value, bool* clean_eof);
  // The next byte, or -1 at the end of the data or on a gzip error (see
  // GzipError()). At the end it looks once more, for a file being streamed.
  int ReadByte();
  // Reads up to `size` bytes into *out, growing it only as data comes, so a
  // length a compressed stream does not hold is never allocated whole.
  // Returns the bytes read.
  uint64_t ReadInto(std::string* out, uint64_t size);
  // Why the data ended: a message if gzip data was truncated or corrupt or a
  // read failed, empty if the data simply ended.
  std::string GzipError();
  Result Fail(uint64_t offset, std::string message);
  // The error of a file whose first field (`tag`) is no packet: what the
  // file is, when its first bytes tell.
  Result FailNotATrace(uint64_t tag);
  // The next packet of the file itself, compressed or not.
  Result ReadFilePacket(std::string* packet, uint64_t* offset);
  // The next packet of the inflated compressed packet being read.
  Result NextInflatedPacket(std::string* packet, uint64_t* offset);

  gzFile file_;  // Owns fd_; reads plain files as they are.
  int fd_;
  // False for standard input: a pipe has no size to check lengths against.
  bool size_known_;
  uint64_t file_size_;
  bool compressed_ = false;
  // OpenRange(): where the range starts in the file; its size is file_size_.
  bool is_range_ = false;
  uint64_t range_offset_ = 0;
  bool not_a_trace_ = false;
  uint64_t position_ = 0;
  bool done_ = false;
  Result final_result_ = Result::kEnd;
  std::string error_;
  uint64_t error_offset_ = 0;
  // The packets of the compressed packet at inflated_offset_, read up to
  // inflated_at_.
  std::string inflated_;
  size_t inflated_at_ = 0;
  uint64_t inflated_offset_ = 0;
  PacketCodec inflated_codec_ = PacketCodec::kNone;
  CompressionStats compression_stats_;
};

// What data that is not a trace is, by its first bytes, for an error that
// says so ("a TAR archive", "zstd-compressed data (decompress it first:
// zstd -d)", "JSON text", ...); nullopt when it may be a trace (empty, the
// packet tag 0x0a first, or gzip'd).
std::optional<std::string> DescribeNotATrace(std::string_view head);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_TRACE_FILE_READER_H_
