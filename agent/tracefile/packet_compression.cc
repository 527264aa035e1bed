#include "agent/tracefile/packet_compression.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

// TracePacket's fields (Perfetto's numbers).
constexpr uint32_t kCompressedPacketsField = 50;
constexpr uint32_t kZstdCompressedPacketsField = 133;

constexpr int kDefaultDeflateLevel = 6;
constexpr int kDefaultZstdLevel = 3;
constexpr int kMaxZstdLevel = 19;
// The largest window zstd uses up to level 19 for inputs of our size.
constexpr int kMaxZstdWindowLog = 23;

class DeflateCompressor : public PacketCompressor {
 public:
  explicit DeflateCompressor(PacketCompression c) : PacketCompressor(c) {}
  ~DeflateCompressor() override {
    if (ready_) deflateEnd(&stream_);
  }

  absl::Status Init() {
    const int level = compression().level == 0 ? kDefaultDeflateLevel : compression().level;
    // The zlib format (windowBits 15), as Perfetto writes field 50.
    if (deflateInit2(&stream_, level, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return absl::ResourceExhaustedError("cannot set up deflate: out of memory");
    }
    ready_ = true;
    return absl::OkStatus();
  }

 protected:
  absl::Status CompressBlock(std::string_view input, std::string* out) override {
    if (deflateReset(&stream_) != Z_OK) return absl::InternalError("deflate reset failed");
    out->resize(deflateBound(&stream_, input.size()));
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_.avail_in = static_cast<uInt>(input.size());
    stream_.next_out = reinterpret_cast<Bytef*>(out->data());
    stream_.avail_out = static_cast<uInt>(out->size());
    if (deflate(&stream_, Z_FINISH) != Z_STREAM_END) {
      return absl::InternalError("deflate did not finish within its own bound");
    }
    out->resize(out->size() - stream_.avail_out);
    return absl::OkStatus();
  }

 private:
  z_stream stream_{};
  bool ready_ = false;
};

class ZstdCompressor : public PacketCompressor {
 public:
  explicit ZstdCompressor(PacketCompression c) : PacketCompressor(c) {}
  ~ZstdCompressor() override { ZSTD_freeCCtx(ctx_); }

  absl::Status Init() {
    ctx_ = ZSTD_createCCtx();
    if (ctx_ == nullptr) return absl::ResourceExhaustedError("cannot set up zstd: out of memory");
    const int level = compression().level == 0 ? kDefaultZstdLevel : compression().level;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, level))) {
      return absl::InvalidArgumentError(absl::StrCat("zstd refuses level ", level));
    }
    // A checksum per frame, as deflate's zlib format has: a flipped bit is
    // an error when read, not wrong packets.
    ZSTD_CCtx_setParameter(ctx_, ZSTD_c_checksumFlag, 1);
    return absl::OkStatus();
  }

 protected:
  absl::Status CompressBlock(std::string_view input, std::string* out) override {
    out->resize(ZSTD_compressBound(input.size()));
    const size_t n = ZSTD_compress2(ctx_, out->data(), out->size(), input.data(), input.size());
    if (ZSTD_isError(n)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
    out->resize(n);
    return absl::OkStatus();
  }

 private:
  ZSTD_CCtx* ctx_ = nullptr;
};

// The size of the framed packet at the start of `data` (tag, length and
// payload), or 0 if `data` does not start with a whole one.
size_t FramedPacketSize(std::string_view data) {
  const auto* begin = reinterpret_cast<const uint8_t*>(data.data());
  const uint8_t* p = begin;
  const uint8_t* end = begin + data.size();
  buffer::Field field;
  if (!buffer::ReadField(&p, end, &field) || field.number != buffer::kTracePacketFieldNumber ||
      field.type != buffer::WireType::kLengthDelimited) {
    return 0;
  }
  return static_cast<size_t>(p - begin);
}

absl::Status InflateDeflate(std::string_view data, size_t max_bytes, std::string* out) {
  if (data.size() > UINT_MAX) return absl::OutOfRangeError("deflate data over 4 GiB");
  z_stream stream{};
  // 32 + 15: zlib or gzip format, whichever the header says.
  if (inflateInit2(&stream, 32 + 15) != Z_OK) {
    return absl::ResourceExhaustedError("cannot set up inflate: out of memory");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  out->clear();
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    if (out->size() >= max_bytes) {
      inflateEnd(&stream);
      return absl::OutOfRangeError(
          absl::StrCat("deflate data inflates past the limit of ", max_bytes, " bytes"));
    }
    const size_t have = out->size();
    const size_t grow = std::min(max_bytes - have, std::max<size_t>(have, 64 << 10));
    out->resize(have + grow);
    stream.next_out = reinterpret_cast<Bytef*>(out->data() + have);
    stream.avail_out = static_cast<uInt>(grow);
    ret = inflate(&stream, Z_NO_FLUSH);
    out->resize(have + grow - stream.avail_out);
    if (ret == Z_STREAM_END) break;
    if (ret == Z_BUF_ERROR && stream.avail_in == 0) {
      inflateEnd(&stream);
      return absl::DataLossError("truncated deflate data: it ends before its end marker");
    }
    if (ret != Z_OK && ret != Z_BUF_ERROR) {
      const std::string why = stream.msg != nullptr ? stream.msg : "corrupt";
      inflateEnd(&stream);
      return absl::DataLossError(absl::StrCat("corrupt deflate data: ", why));
    }
  }
  const bool trailing = stream.avail_in != 0;
  inflateEnd(&stream);
  if (trailing) return absl::DataLossError("corrupt deflate data: bytes after its end marker");
  return absl::OkStatus();
}

absl::Status InflateZstd(std::string_view data, size_t max_bytes, std::string* out) {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  if (ctx == nullptr) return absl::ResourceExhaustedError("cannot set up zstd: out of memory");
  // A frame's header names the window it needs, and the decoder allocates
  // it: held to what ringside's levels use.
  ZSTD_DCtx_setParameter(ctx, ZSTD_d_windowLogMax, kMaxZstdWindowLog);
  // The frame's declared size is not trusted: the output grows as it comes.
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  out->clear();
  size_t ret = 1;
  absl::Status status;
  while (in.pos < in.size || ret != 0) {
    if (out->size() >= max_bytes) {
      status = absl::OutOfRangeError(
          absl::StrCat("zstd data inflates past the limit of ", max_bytes, " bytes"));
      break;
    }
    const size_t have = out->size();
    const size_t grow = std::min(max_bytes - have, std::max<size_t>(have, 64 << 10));
    out->resize(have + grow);
    ZSTD_outBuffer o{out->data() + have, grow, 0};
    const size_t before = in.pos;
    ret = ZSTD_decompressStream(ctx, &o, &in);
    out->resize(have + o.pos);
    if (ZSTD_isError(ret)) {
      status = absl::DataLossError(absl::StrCat("corrupt zstd data: ", ZSTD_getErrorName(ret)));
      break;
    }
    if (ret != 0 && in.pos == in.size && in.pos == before && o.pos == 0) {
      status = absl::DataLossError("truncated zstd data: the frame ends early");
      break;
    }
  }
  ZSTD_freeDCtx(ctx);
  return status;
}

}  // namespace

const char* PacketCodecName(PacketCodec codec) {
  switch (codec) {
    case PacketCodec::kNone:
      return "none";
    case PacketCodec::kDeflate:
      return "deflate";
    case PacketCodec::kZstd:
      return "zstd";
  }
  return "none";
}

absl::StatusOr<PacketCompression> ParsePacketCompression(const std::string& name) {
  PacketCompression c;
  std::string codec = name;
  std::string level;
  if (const size_t colon = name.find(':'); colon != std::string::npos) {
    codec = name.substr(0, colon);
    level = name.substr(colon + 1);
  }
  if (codec == "zstd") {
    c.codec = PacketCodec::kZstd;
  } else if (codec == "deflate") {
    c.codec = PacketCodec::kDeflate;
  } else if (codec == "none" && level.empty()) {
    return c;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown compression '", name, "': zstd, zstd:LEVEL, deflate or none"));
  }
  if (!level.empty()) {
    // Perfetto's config has a level for zstd only.
    if (c.codec == PacketCodec::kDeflate) {
      return absl::InvalidArgumentError("deflate takes no level (it compresses at 6)");
    }
    if (!absl::SimpleAtoi(level, &c.level) || c.level < 1 || c.level > kMaxZstdLevel) {
      return absl::InvalidArgumentError(
          absl::StrCat("zstd level '", level, "': 1 to ", kMaxZstdLevel));
    }
  }
  return c;
}

PacketCompression PacketCompressionOf(const config::TraceConfig& config) {
  PacketCompression c;
  if (config.has_compression()) {
    const auto& cc = config.compression();
    if (cc.has_zstd()) {
      c.codec = PacketCodec::kZstd;
      c.level = cc.zstd().level();
    } else if (cc.has_deflate()) {
      c.codec = PacketCodec::kDeflate;
    }
    return c;
  }
  if (config.compression_type() == config::TraceConfig::COMPRESSION_TYPE_DEFLATE) {
    c.codec = PacketCodec::kDeflate;
  }
  return c;
}

void SetPacketCompression(PacketCompression c, config::TraceConfig* config) {
  config->clear_compression();
  config->clear_compression_type();
  switch (c.codec) {
    case PacketCodec::kZstd:
      if (c.level != 0) {
        config->mutable_compression()->mutable_zstd()->set_level(c.level);
      } else {
        config->mutable_compression()->mutable_zstd();
      }
      break;
    case PacketCodec::kDeflate:
      // Perfetto's deflate takes no level.
      config->mutable_compression()->mutable_deflate();
      break;
    case PacketCodec::kNone:
      break;
  }
}

absl::StatusOr<std::unique_ptr<PacketCompressor>> PacketCompressor::Create(
    PacketCompression compression) {
  const int max = compression.codec == PacketCodec::kZstd ? kMaxZstdLevel : 9;
  if (compression.level < 0 || compression.level > max) {
    return absl::InvalidArgumentError(absl::StrCat(PacketCodecName(compression.codec), " level ",
                                                   compression.level, ": 1 to ", max));
  }
  switch (compression.codec) {
    case PacketCodec::kDeflate: {
      auto c = std::unique_ptr<DeflateCompressor>(new DeflateCompressor(compression));
      if (absl::Status st = c->Init(); !st.ok()) return st;
      return std::unique_ptr<PacketCompressor>(std::move(c));
    }
    case PacketCodec::kZstd: {
      auto c = std::unique_ptr<ZstdCompressor>(new ZstdCompressor(compression));
      if (absl::Status st = c->Init(); !st.ok()) return st;
      return std::unique_ptr<PacketCompressor>(std::move(c));
    }
    case PacketCodec::kNone:
      break;
  }
  return absl::InvalidArgumentError("no codec to compress with");
}

absl::Status PacketCompressor::Compress(std::string_view packets, std::string* out) {
  const size_t before = out->size();
  absl::Status status;
  size_t run_start = 0, at = 0;
  auto flush = [&] {
    if (at > run_start) status = CompressRun(packets.substr(run_start, at - run_start), out);
    run_start = at;
    return status.ok();
  };
  while (at < packets.size()) {
    const size_t size = FramedPacketSize(packets.substr(at));
    if (size == 0) {
      status = absl::InvalidArgumentError(
          absl::StrCat("not a whole framed packet at byte ", at, " of ", packets.size()));
      break;
    }
    if (size > kMaxCompressedInputBytes) {
      // Alone it would make a compressed packet past Perfetto's limit.
      if (!flush()) break;
      out->append(packets.substr(at, size));
      at += size;
      run_start = at;
      continue;
    }
    if (at + size - run_start > kMaxCompressedInputBytes && !flush()) break;
    at += size;
  }
  if (status.ok()) flush();
  if (!status.ok()) out->resize(before);
  return status;
}

absl::Status PacketCompressor::CompressRun(std::string_view run, std::string* out) {
  if (absl::Status st = CompressBlock(run, &block_); !st.ok()) return st;
  const uint32_t field = compression_.codec == PacketCodec::kZstd ? kZstdCompressedPacketsField
                                                                  : kCompressedPacketsField;
  // The TracePacket: one field, the compressed run.
  const size_t packet_size =
      buffer::VarIntSize(buffer::MakeTag(field, buffer::WireType::kLengthDelimited)) +
      buffer::VarIntSize(block_.size()) + block_.size();
  buffer::AppendTag(buffer::kTracePacketFieldNumber, buffer::WireType::kLengthDelimited, out);
  buffer::AppendVarInt(packet_size, out);
  buffer::AppendLengthDelimitedField(field, block_, out);
  return absl::OkStatus();
}

std::optional<CompressedPayload> FindCompressedPayload(std::string_view packet) {
  const auto* p = reinterpret_cast<const uint8_t*>(packet.data());
  const uint8_t* end = p + packet.size();
  buffer::Field field;
  while (p < end && buffer::ReadField(&p, end, &field)) {
    if (field.type != buffer::WireType::kLengthDelimited) continue;
    if (field.number == kCompressedPacketsField) {
      return CompressedPayload{PacketCodec::kDeflate, field.bytes};
    }
    if (field.number == kZstdCompressedPacketsField) {
      return CompressedPayload{PacketCodec::kZstd, field.bytes};
    }
  }
  return std::nullopt;
}

absl::Status InflatePayload(const CompressedPayload& payload, size_t max_bytes, std::string* out) {
  switch (payload.codec) {
    case PacketCodec::kDeflate:
      return InflateDeflate(payload.data, max_bytes, out);
    case PacketCodec::kZstd:
      return InflateZstd(payload.data, max_bytes, out);
    case PacketCodec::kNone:
      break;
  }
  return absl::InvalidArgumentError("no codec to inflate with");
}

}  // namespace ringside::agent
