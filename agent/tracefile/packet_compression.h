#ifndef RINGSIDE_AGENT_TRACEFILE_PACKET_COMPRESSION_H_
#define RINGSIDE_AGENT_TRACEFILE_PACKET_COMPRESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <string_view>
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Perfetto's compressed packets: a TracePacket whose one field holds a run
// of framed packets (a serialized Trace) compressed whole, with deflate
// (zlib format) in `compressed_packets` (field 50) or with zstd in
// `zstd_compressed_packets` (field 133). A reader replaces the packet by
// the packets inside; trace_processor does so from Perfetto v58 (zstd only
// in builds with zstd).

enum class PacketCodec { kNone, kDeflate, kZstd };

// "none", "deflate", "zstd".
const char* PacketCodecName(PacketCodec codec);

struct PacketCompression {
  PacketCodec codec = PacketCodec::kNone;
  // 0: the codec's default (deflate 6, zstd 3). Deflate takes 1 to 9, zstd
  // 1 to 19.
  int level = 0;
};

// The codec and level of `name` as `record --compress` takes it: "zstd",
// "zstd:9", "deflate", "none".
absl::StatusOr<PacketCompression> ParsePacketCompression(const std::string& name);

// What a config asks for: `compression`, else the older `compression_type`;
// none when neither is set. (Levels are checked by ValidateConfig.)
PacketCompression PacketCompressionOf(const config::TraceConfig& config);

// Sets `compression` in *config to `c` (clears both fields for none), so
// the config a file embeds says how it was written.
void SetPacketCompression(PacketCompression c, config::TraceConfig* config);

// At most this many bytes of framed packets go into one compressed packet,
// so that one stays under Perfetto's 512 KiB packet limit even when the
// data does not compress at all. A packet larger than this on its own is
// written as it is, uncompressed.
inline constexpr size_t kMaxCompressedInputBytes = 480 << 10;

// A compressed packet may inflate to at most this: a reader refuses more
// rather than allocating what a packet claims.
inline constexpr size_t kMaxInflatedBytes = 64 << 20;

// Compresses runs of framed packets (tag 0x0a, length, TracePacket) into
// framed compressed packets. Keeps its codec's context from call to call.
// Not thread-safe.
class PacketCompressor {
 public:
  // Fails on a codec of kNone or a level out of its range.
  static absl::StatusOr<std::unique_ptr<PacketCompressor>> Create(PacketCompression compression);
  virtual ~PacketCompressor() = default;

  // Appends to *out one framed compressed packet per up to
  // kMaxCompressedInputBytes of `packets` (split between whole packets; a
  // larger packet is appended as it is). `packets` must be whole framed
  // packets: on an error (one that is not) *out is left as it was.
  absl::Status Compress(std::string_view packets, std::string* out);

  PacketCompression compression() const { return compression_; }

 protected:
  explicit PacketCompressor(PacketCompression compression) : compression_(compression) {}
  // Compresses `input` whole into *out (replacing its contents).
  virtual absl::Status CompressBlock(std::string_view input, std::string* out) = 0;

 private:
  absl::Status CompressRun(std::string_view run, std::string* out);

  PacketCompression compression_;
  std::string block_;
};

// The compressed payload a TracePacket's bytes carry, if any: the first
// `compressed_packets` or `zstd_compressed_packets` field at its top level.
// Reads untrusted bytes: nullopt when there is none or the packet does not
// parse as far as that field.
struct CompressedPayload {
  PacketCodec codec = PacketCodec::kNone;
  std::string_view data;
};
std::optional<CompressedPayload> FindCompressedPayload(std::string_view packet);

// Inflates `payload` into *out. An error names the codec and what is wrong
// (corrupt, truncated, or more than `max_bytes` once inflated); *out never
// grows past max_bytes, and zstd's window is held to 8 MiB (what level 19
// uses), whatever a frame asks for.
absl::Status InflatePayload(const CompressedPayload& payload, size_t max_bytes, std::string* out);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_PACKET_COMPRESSION_H_
