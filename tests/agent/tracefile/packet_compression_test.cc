#include "agent/tracefile/packet_compression.h"

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/output/compressing_sink.h"
#include "agent/tracefile/trace_file_reader.h"
#include "agent/tracefile/trace_sink.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

using Result = TraceFileReader::Result;

// What a trace file holds for `packet`: a Trace.packet field.
std::string Framed(const std::string& packet) {
  std::string out;
  buffer::AppendLengthDelimitedField(buffer::kTracePacketFieldNumber, packet, &out);
  return out;
}

// `n` framed packets of about `size` bytes each, numbered by timestamp,
// with content that compresses as traces do (repeated names, small ints).
std::string Packets(int n, size_t size) {
  std::string out;
  for (int i = 0; i < n; i++) {
    trace::TracePacket p;
    p.set_timestamp(static_cast<uint64_t>(i));
    auto* e = p.mutable_ftrace_events()->add_event();
    std::string buf;
    while (buf.size() < size) buf += "kworker/" + std::to_string(i % 7) + " ";
    e->mutable_print()->set_buf(buf);
    out += Framed(p.SerializeAsString());
  }
  return out;
}

// A file of `bytes`, removed when the test ends.
class CompressedFile {
 public:
  explicit CompressedFile(const std::string& bytes) {
    static int n = 0;
    path_ = ::testing::TempDir() + "ringside_compressed_" + std::to_string(getpid()) + "_" +
            std::to_string(n++);
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }
  ~CompressedFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ReadBack {
  std::vector<std::string> packets;
  std::vector<uint64_t> offsets;
  Result end = Result::kEnd;
  std::string error;
  uint64_t error_offset = 0;
  TraceFileReader::CompressionStats stats;
};

ReadBack ReadAll(const std::string& bytes) {
  CompressedFile file(bytes);
  ReadBack out;
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(file.path());
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  std::string packet;
  uint64_t offset = 0;
  for (;;) {
    const Result r = (*reader)->ReadNextPacket(&packet, &offset);
    if (r != Result::kPacket) {
      out.end = r;
      out.error = (*reader)->error();
      out.error_offset = (*reader)->error_offset();
      break;
    }
    out.packets.push_back(Framed(packet));
    out.offsets.push_back(offset);
  }
  out.stats = (*reader)->compression_stats();
  return out;
}

std::string Concat(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += p;
  return out;
}

// A framed TracePacket whose field `field` holds `payload`.
std::string Container(uint32_t field, const std::string& payload) {
  std::string packet;
  buffer::AppendLengthDelimitedField(field, payload, &packet);
  return Framed(packet);
}

std::string Zstd(const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 1));
  return out;
}

std::string Zlib(const std::string& bytes) {
  uLongf size = compressBound(bytes.size());
  std::string out(size, '\0');
  compress(reinterpret_cast<Bytef*>(out.data()), &size,
           reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  out.resize(size);
  return out;
}

class CodecTest : public ::testing::TestWithParam<PacketCodec> {};

TEST_P(CodecTest, CompressedPacketsReadBackAsThePacketsThatWentIn) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string plain = Packets(2000, 300);
  std::string compressed;
  ASSERT_TRUE((*c)->Compress(plain, &compressed).ok());
  // Compressed well, and cut so that no compressed packet passes 512 KiB.
  EXPECT_LT(compressed.size(), plain.size() / 4);
  const ReadBack back = ReadAll(compressed);
  ASSERT_EQ(back.end, Result::kEnd) << back.error;
  EXPECT_EQ(Concat(back.packets), plain);
  const uint64_t containers = back.stats.deflate_packets + back.stats.zstd_packets;
  EXPECT_GE(containers, plain.size() / kMaxCompressedInputBytes);
  EXPECT_EQ(back.stats.inflated_bytes, plain.size());
}

TEST_P(CodecTest, APacketLargerThanABatchIsWrittenAsItIs) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok());
  const std::string small = Packets(10, 100), big = Packets(1, kMaxCompressedInputBytes + 1);
  std::string file;
  ASSERT_TRUE((*c)->Compress(small + big + small, &file).ok());
  const ReadBack back = ReadAll(file);
  ASSERT_EQ(back.end, Result::kEnd) << back.error;
  EXPECT_EQ(Concat(back.packets), small + big + small);
  // The two runs of small ones compressed, the big one plain between them.
  EXPECT_EQ(back.stats.deflate_packets + back.stats.zstd_packets, 2u);
  EXPECT_NE(file.find(big), std::string::npos);
}

TEST_P(CodecTest, EveryCompressedPacketStaysUnderPerfettosLimitEvenIncompressible) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok()) << c.status();
  // Random bytes do not compress.
  std::string plain;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 400; i++) {
    std::string payload(4000, '\0');
    for (char& ch : payload) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ch = static_cast<char>(x);
    }
    trace::TracePacket p;
    p.set_synchronization_marker(payload);
    plain += Framed(p.SerializeAsString());
  }
  std::string compressed;
  ASSERT_TRUE((*c)->Compress(plain, &compressed).ok());
  const auto* p = reinterpret_cast<const uint8_t*>(compressed.data());
  const uint8_t* end = p + compressed.size();
  buffer::Field f;
  int n = 0;
  while (p < end) {
    ASSERT_TRUE(buffer::ReadField(&p, end, &f));
    EXPECT_LT(f.bytes.size(), 512u << 10);
    n++;
  }
  EXPECT_GE(n, 4);
  EXPECT_EQ(Concat(ReadAll(compressed).packets), plain);
}

TEST_P(CodecTest, AFileMayMixCompressedAndPlainPackets) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok());
  const std::string a = Packets(3, 50), b = Packets(5, 70), tail = Packets(2, 10);
  std::string file = a;
  ASSERT_TRUE((*c)->Compress(b, &file).ok());
  file += tail;
  const ReadBack back = ReadAll(file);
  ASSERT_EQ(back.end, Result::kEnd) << back.error;
  EXPECT_EQ(Concat(back.packets), a + b + tail);
  // The packets from inside carry the compressed packet's offset.
  ASSERT_EQ(back.offsets.size(), 10u);
  EXPECT_EQ(back.offsets[3], a.size());
  EXPECT_EQ(back.offsets[7], a.size());
  EXPECT_GT(back.offsets[8], a.size());
}

TEST_P(CodecTest, CorruptPayloadIsAnErrorAtItsPacketAfterTheGoodOnes) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok());
  const std::string good = Packets(4, 40);
  std::string compressed;
  ASSERT_TRUE((*c)->Compress(Packets(50, 100), &compressed).ok());
  // Flip bytes in the middle of the compressed stream.
  for (size_t i = compressed.size() / 2; i < compressed.size() / 2 + 8; i++) compressed[i] ^= 0x5a;
  const ReadBack back = ReadAll(good + compressed);
  EXPECT_EQ(back.end, Result::kError);
  EXPECT_EQ(Concat(back.packets), good);
  EXPECT_EQ(back.error_offset, good.size());
  EXPECT_NE(back.error.find("compressed packet"), std::string::npos) << back.error;
  EXPECT_NE(back.error.find(PacketCodecName(GetParam())), std::string::npos) << back.error;
}

TEST_P(CodecTest, TruncatedPayloadIsAnError) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c = PacketCompressor::Create({GetParam(), 0});
  ASSERT_TRUE(c.ok());
  std::string compressed;
  ASSERT_TRUE((*c)->Compress(Packets(50, 100), &compressed).ok());
  // The one compressed packet's TracePacket bytes, then its payload.
  const auto* p = reinterpret_cast<const uint8_t*>(compressed.data());
  buffer::Field packet;
  ASSERT_TRUE(buffer::ReadField(&p, p + compressed.size(), &packet));
  std::optional<CompressedPayload> payload = FindCompressedPayload(packet.bytes);
  ASSERT_TRUE(payload.has_value());
  const uint32_t field = GetParam() == PacketCodec::kZstd ? 133 : 50;
  const std::string cut(payload->data.substr(0, payload->data.size() - 10));
  const ReadBack back = ReadAll(Container(field, cut));
  EXPECT_EQ(back.end, Result::kError);
  EXPECT_TRUE(back.packets.empty());
  EXPECT_EQ(back.error_offset, 0u);
  EXPECT_NE(back.error.find("truncated"), std::string::npos) << back.error;
}

INSTANTIATE_TEST_SUITE_P(BothCodecs, CodecTest,
                         ::testing::Values(PacketCodec::kDeflate, PacketCodec::kZstd),
                         [](const auto& info) { return std::string(PacketCodecName(info.param)); });

TEST(PacketCompressionTest, APacketThatInflatesPastTheLimitIsRefusedNotAllocated) {
  // 65 MiB of zeros in a few KiB: a packet bomb.
  const std::string zeros(kMaxInflatedBytes + (1 << 20), '\0');
  for (const auto& [field, payload] :
       {std::pair<uint32_t, std::string>{133, Zstd(zeros)}, {50, Zlib(zeros)}}) {
    ASSERT_LT(payload.size(), 1u << 20);
    const ReadBack back = ReadAll(Container(field, payload));
    EXPECT_EQ(back.end, Result::kError);
    EXPECT_NE(back.error.find("past the limit of 67108864 bytes"), std::string::npos) << back.error;
  }
  // And below the limit the same codec is fine.
  std::string out;
  EXPECT_TRUE(InflatePayload({PacketCodec::kZstd, Zstd(std::string(1000, 'a'))}, 1000, &out).ok());
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_FALSE(InflatePayload({PacketCodec::kZstd, Zstd(std::string(1001, 'a'))}, 1000, &out).ok());
  EXPECT_LE(out.size(), 1000u);
}

TEST(PacketCompressionTest, AZstdFrameAskingForAHugeWindowIsRefusedBeforeItIsAllocated) {
  // A frame header alone: magic, no content size, a window of 2^27 (the
  // exponent 17 above 10), then a raw last block of 5 bytes.
  const std::string frame("\x28\xb5\x2f\xfd\x00\x88\x29\x00\x00hello", 15);
  std::string out;
  const absl::Status st = InflatePayload({PacketCodec::kZstd, frame}, kMaxInflatedBytes, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("corrupt zstd data"), std::string::npos) << st;
  EXPECT_TRUE(out.empty() || out.size() <= (64u << 10));
}

TEST(PacketCompressionTest, ACompressedPacketInsideACompressedPacketIsAnError) {
  const std::string inner = Container(133, Zstd(Packets(3, 20)));
  const ReadBack back = ReadAll(Container(133, Zstd(inner)));
  EXPECT_EQ(back.end, Result::kError);
  EXPECT_NE(back.error.find("another compressed packet"), std::string::npos) << back.error;
}

TEST(PacketCompressionTest, InflatedBytesThatAreNotPacketsAreAnError) {
  const std::string good = Packets(2, 10);
  const ReadBack back = ReadAll(Container(50, Zlib(good + "\x12\x03xyz")));
  EXPECT_EQ(back.end, Result::kError);
  EXPECT_EQ(Concat(back.packets), good);
  EXPECT_NE(back.error.find("not a whole trace packet at byte " + std::to_string(good.size())),
            std::string::npos)
      << back.error;
}

TEST(PacketCompressionTest, ManyEmptyCompressedPacketsReadAsNothing) {
  std::string file;
  const std::string empty = Container(133, Zstd(""));
  for (int i = 0; i < 200000; i++) file += empty;  // Deep recursion would overflow.
  file += Packets(1, 5);
  const ReadBack back = ReadAll(file);
  EXPECT_EQ(back.end, Result::kEnd) << back.error;
  EXPECT_EQ(back.packets.size(), 1u);
}

TEST(PacketCompressionTest, CodecNamesAndLevelsAsRecordTakesThem) {
  EXPECT_EQ(ParsePacketCompression("zstd")->codec, PacketCodec::kZstd);
  EXPECT_EQ(ParsePacketCompression("zstd:9")->level, 9);
  EXPECT_EQ(ParsePacketCompression("deflate")->codec, PacketCodec::kDeflate);
  EXPECT_EQ(ParsePacketCompression("none")->codec, PacketCodec::kNone);
  for (const char* bad : {"gzip", "zstd:0", "zstd:20", "zstd:x", "deflate:6", "none:1", ""}) {
    EXPECT_FALSE(ParsePacketCompression(bad).ok()) << bad;
  }
  EXPECT_FALSE(PacketCompressor::Create({PacketCodec::kNone, 0}).ok());
  EXPECT_FALSE(PacketCompressor::Create({PacketCodec::kZstd, 20}).ok());
}

TEST(PacketCompressionTest, TheConfigSaysWhatToUsePerfettosFormsIncluded) {
  config::TraceConfig c;
  EXPECT_EQ(PacketCompressionOf(c).codec, PacketCodec::kNone);
  c.set_compression_type(config::TraceConfig::COMPRESSION_TYPE_DEFLATE);
  EXPECT_EQ(PacketCompressionOf(c).codec, PacketCodec::kDeflate);
  c.mutable_compression()->mutable_zstd()->set_level(7);  // Wins over the older field.
  EXPECT_EQ(PacketCompressionOf(c).codec, PacketCodec::kZstd);
  EXPECT_EQ(PacketCompressionOf(c).level, 7);
  SetPacketCompression({PacketCodec::kDeflate, 0}, &c);
  EXPECT_TRUE(c.compression().has_deflate());
  EXPECT_FALSE(c.has_compression_type());
  SetPacketCompression({PacketCodec::kNone, 0}, &c);
  EXPECT_EQ(PacketCompressionOf(c).codec, PacketCodec::kNone);
}

TEST(CompressingSinkTest, EachWriteIsAWholeReadableTraceInTheInnerSink) {
  absl::StatusOr<std::unique_ptr<PacketCompressor>> c =
      PacketCompressor::Create({PacketCodec::kZstd, 0});
  ASSERT_TRUE(c.ok());
  StringSink inner;
  CompressingSink sink(&inner, std::move(*c));
  const std::string first = Packets(100, 80), second = Packets(30, 20);
  ASSERT_TRUE(sink.Write(first).ok());
  EXPECT_EQ(Concat(ReadAll(inner.data()).packets), first);
  ASSERT_TRUE(sink.Write(second).ok());
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_TRUE(inner.finished());
  EXPECT_EQ(Concat(ReadAll(inner.data()).packets), first + second);
  EXPECT_EQ(sink.bytes_written(), inner.data().size());
  EXPECT_EQ(sink.bytes_in(), first.size() + second.size());
  EXPECT_EQ(sink.bytes_out(), inner.data().size());
}

TEST(CompressingSinkTest, AWriteThatIsNotWholePacketsIsRefusedAndNothingWritten) {
  StringSink inner;
  absl::StatusOr<std::unique_ptr<PacketCompressor>> deflate =
      PacketCompressor::Create({PacketCodec::kDeflate, 0});
  ASSERT_TRUE(deflate.ok());
  CompressingSink sink(&inner, std::move(*deflate));
  const std::string packets = Packets(20, 50);
  EXPECT_FALSE(sink.Write(packets.substr(0, packets.size() - 1)).ok());
  EXPECT_TRUE(inner.data().empty());
  EXPECT_EQ(sink.bytes_in(), 0u);
}

// A sink whose writes fail until told otherwise (a full disk).
class FailingSink : public TraceSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    if (failing) return absl::ResourceExhaustedError("disk full");
    data.append(packets.data(), packets.size());
    return absl::OkStatus();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  const std::string& display_name() const override { return name; }
  uint64_t bytes_written() const override { return data.size(); }
  bool failing = true;
  std::string data, name = "failing";
};

TEST(CompressingSinkTest, AFailedWriteRetriedIsWrittenAndCountedOnce) {
  FailingSink inner;
  absl::StatusOr<std::unique_ptr<PacketCompressor>> zstd =
      PacketCompressor::Create({PacketCodec::kZstd, 0});
  ASSERT_TRUE(zstd.ok());
  CompressingSink sink(&inner, std::move(*zstd));
  const std::string packets = Packets(50, 60);
  EXPECT_EQ(sink.Write(packets).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(sink.bytes_in(), 0u);
  inner.failing = false;
  ASSERT_TRUE(sink.Write(packets).ok());
  EXPECT_EQ(sink.bytes_in(), packets.size());
  EXPECT_EQ(sink.bytes_out(), inner.data.size());
  EXPECT_EQ(Concat(ReadAll(inner.data).packets), packets);
}

}  // namespace
}  // namespace ringside::agent
