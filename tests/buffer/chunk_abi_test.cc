#include "buffer/chunk_abi.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::buffer {
namespace {

TEST(ChunkAbiTest, HeaderLayoutMatchesPerfettoSharedMemoryAbi) {
  // chunk_id u32 LE, writer_id u16 LE, packets u16 LE: count in bits 0..9,
  // flags in bits 10..15.
  uint8_t bytes[kChunkHeaderSize];
  WriteChunkHeader(ChunkHeader{0x04030201, 0x0605, 3, kLastPacketContinuesOnNextChunk}, bytes);
  const uint8_t expected[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x03, 0x08};
  EXPECT_EQ(std::string(bytes, bytes + 8), std::string(expected, expected + 8));

  ChunkHeader h;
  ASSERT_TRUE(ReadChunkHeader(bytes, sizeof(bytes), &h));
  EXPECT_EQ(h.chunk_id, 0x04030201u);
  EXPECT_EQ(h.writer_id, 0x0605);
  EXPECT_EQ(h.num_fragments, 3);
  EXPECT_EQ(h.flags, kLastPacketContinuesOnNextChunk);
  EXPECT_FALSE(ReadChunkHeader(bytes, 7, &h));
}

TEST(ChunkAbiTest, FragmentCountAndFlagsUseTheirBitWidths) {
  uint8_t bytes[kChunkHeaderSize];
  WriteChunkHeader(ChunkHeader{0, 0, kMaxFragmentsPerChunk, kAllChunkFlags}, bytes);
  ChunkHeader h;
  ASSERT_TRUE(ReadChunkHeader(bytes, sizeof(bytes), &h));
  EXPECT_EQ(h.num_fragments, 1023);
  EXPECT_EQ(h.flags, kAllChunkFlags);
}

TEST(ChunkAbiTest, RedundantVarintIsAlwaysFourBytes) {
  uint8_t b[4];
  WriteRedundantVarInt(5, b);
  EXPECT_EQ(std::string(b, b + 4), std::string("\x85\x80\x80\x00", 4));
  uint32_t v = 0;
  EXPECT_EQ(ReadFragmentSize(b, b + 4, &v), 4u);
  EXPECT_EQ(v, 5u);
  WriteRedundantVarInt(kPacketSizeDropPacket, b);
  EXPECT_EQ(std::string(b, b + 4), std::string("\xff\xff\xff\x7f", 4));
  EXPECT_EQ(ReadFragmentSize(b, b + 4, &v), 4u);
  EXPECT_EQ(v, kPacketSizeDropPacket);
  EXPECT_EQ(kPacketSizeDropPacket, (1u << 28) - 1);
}

TEST(ChunkAbiTest, ReadFragmentSizeRejectsTruncatedAndOverlongVarints) {
  const uint8_t short_form[] = {0x7f};
  uint32_t v = 0;
  EXPECT_EQ(ReadFragmentSize(short_form, short_form + 1, &v), 1u);
  EXPECT_EQ(v, 127u);
  const uint8_t truncated[] = {0x80, 0x80};
  EXPECT_EQ(ReadFragmentSize(truncated, truncated + 2, &v), 0u);
  const uint8_t overlong[] = {0x80, 0x80, 0x80, 0x80, 0x01};
  EXPECT_EQ(ReadFragmentSize(overlong, overlong + 5, &v), 0u);
}

TEST(ChunkAbiTest, BuilderLaysOutFragmentsAfterTheHeader) {
  ChunkBuilder b(9, 2);
  b.AddFragment("ab").AddDropMarker().set_flags(kChunkNeedsPatching);
  std::vector<uint8_t> chunk = b.Build();
  ASSERT_EQ(chunk.size(), kChunkHeaderSize + 4 + 2 + 4);
  ChunkHeader h;
  ASSERT_TRUE(ReadChunkHeader(chunk.data(), chunk.size(), &h));
  EXPECT_EQ(h.chunk_id, 9u);
  EXPECT_EQ(h.writer_id, 2);
  EXPECT_EQ(h.num_fragments, 2);
  EXPECT_EQ(h.flags, kChunkNeedsPatching);
  EXPECT_EQ(std::string(chunk.begin() + 8, chunk.end()), std::string("\x82\x80\x80\x00"
                                                                     "ab"
                                                                     "\xff\xff\xff\x7f",
                                                                     10));
}

}  // namespace
}  // namespace ringside::buffer
