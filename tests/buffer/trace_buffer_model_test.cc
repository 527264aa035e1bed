// Model-based differential test of TraceBuffer: random operation sequences run
// against the buffer and a deliberately simple reference model (see
// testing/buffer_harness.h). Without wrap the two must agree exactly on every
// packet and loss flag; with wrap every packet must be one the writer wrote,
// in order, with losses flagged.

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/buffer/testing/buffer_harness.h"

namespace ringside::buffer::testing {
namespace {

// Builds scripts in the harness's encoding: [op][sequence][arguments...].
class ScriptBuilder {
 public:
  // `capacity_steps[i]` sets sequence i's chunk payload to 64 + 60 * (step %
  // 16), and its first ChunkID to (step / 16) * 0x11111111.
  explicit ScriptBuilder(const std::vector<uint8_t>& capacity_steps) {
    for (uint8_t s : capacity_steps) bytes_.push_back(s);
  }
  ScriptBuilder& Write(uint8_t seq, uint8_t count, uint16_t size) {
    Op(0, seq);
    bytes_.push_back(static_cast<uint8_t>(count - 1));
    for (int i = 0; i < count; i++) U16(static_cast<uint16_t>(size - 17));
    return *this;
  }
  ScriptBuilder& Flush(uint8_t seq, uint8_t order = 0) { return Op(1, seq).Byte(order); }
  ScriptBuilder& Scrape(uint8_t seq) { return Op(2, seq).Byte(0); }
  ScriptBuilder& Drop(uint8_t seq, uint8_t n) { return Op(3, seq).Byte(n - 1); }
  ScriptBuilder& Patch(uint8_t seq, uint8_t n) { return Op(4, seq).Byte(n); }
  ScriptBuilder& ReadSome(uint8_t n, bool begin) {
    return Op(5, 0).Byte(begin ? 1 : 0).Byte(n - 1);
  }
  ScriptBuilder& ReadAll() { return Op(6, 0); }
  // `copy_on_write`: and a copy-on-write clone, checked against the eager one
  // once complete.
  ScriptBuilder& Clone(bool copy_on_write) {
    bytes_.push_back(copy_on_write ? 7 + 12 : 7);
    bytes_.push_back(0);
    return *this;
  }
  ScriptBuilder& TogglePatching(uint8_t seq) { return Op(10, seq); }
  ScriptBuilder& ToggleEmptyChunks(uint8_t seq) { return Op(11, seq); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  // The operation's byte also says how many blocks of a copy-on-write clone in
  // progress to copy before it (its multiple of 12): varied, 0 to 3.
  ScriptBuilder& Op(uint8_t op, uint8_t seq) {
    bytes_.push_back(static_cast<uint8_t>(op + 12 * (ops_++ % 4)));
    bytes_.push_back(seq);
    return *this;
  }
  ScriptBuilder& Byte(uint8_t b) {
    bytes_.push_back(b);
    return *this;
  }
  void U16(uint16_t v) {
    bytes_.push_back(static_cast<uint8_t>(v));
    bytes_.push_back(static_cast<uint8_t>(v >> 8));
  }
  std::vector<uint8_t> bytes_;
  uint32_t ops_ = 0;
};

HarnessResult RunScript(const std::vector<uint8_t>& script, size_t buffer_size) {
  HarnessOptions options;
  options.buffer_size = buffer_size;
  return RunBufferScript(script.data(), script.size(), options);
}

// A random script whose operations are mostly meaningful for the writers.
std::vector<uint8_t> RandomScript(uint32_t seed, int operations) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> capacities;
  for (int i = 0; i < 6; i++) {
    const uint32_t first_id = rng() % 4 == 0 ? rng() % 16 : 0;
    capacities.push_back(static_cast<uint8_t>(first_id << 4 | rng() % 16));
  }
  ScriptBuilder b(capacities);
  for (int i = 0; i < operations; i++) {
    const uint8_t seq = static_cast<uint8_t>(rng() % 6);
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
        b.Write(seq, static_cast<uint8_t>(1 + rng() % 4), static_cast<uint16_t>(17 + rng() % 1500));
        break;
      case 3:
        b.Flush(seq, static_cast<uint8_t>(rng()));
        break;
      case 4:
        b.Scrape(seq);
        break;
      case 5:
        if (rng() % 3 == 0)
          b.Drop(seq, static_cast<uint8_t>(1 + rng() % 5));
        else if (rng() % 2 == 0)
          b.TogglePatching(seq);
        else
          b.ToggleEmptyChunks(seq);
        break;
      case 6:
        b.Patch(seq, static_cast<uint8_t>(rng() % 4));
        break;
      case 7:
        b.ReadSome(static_cast<uint8_t>(1 + rng() % 32), rng() % 2);
        break;
      case 8:
        b.ReadAll();
        break;
      case 9:
        if (rng() % 4 == 0)
          b.Clone(rng() % 2 == 0);
        else
          b.Flush(seq, static_cast<uint8_t>(rng()));
        break;
    }
  }
  return b.bytes();
}

TEST(TraceBufferModelTest, WithoutWrapBufferAndModelEmitExactlyTheSamePacketsAndLosses) {
  uint64_t checked = 0;
  for (uint32_t seed = 0; seed < 3000; seed++) {
    const std::vector<uint8_t> script = RandomScript(seed, 60);
    HarnessResult r = RunScript(script, 8 << 20);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
    ASSERT_FALSE(r.wrapped) << "seed " << seed;
    checked += r.packets_checked_against_model;
  }
  EXPECT_GT(checked, 10000u);
}

TEST(TraceBufferModelTest, WithWrapEveryPacketIsOneTheWriterWroteInOrderWithLossesFlagged) {
  uint64_t losses = 0;
  for (uint32_t seed = 0; seed < 3000; seed++) {
    const std::vector<uint8_t> script = RandomScript(100000 + seed, 80);
    HarnessResult r = RunScript(script, 4096 * (1 + seed % 4));
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
    losses += r.losses_flagged;
  }
  EXPECT_GT(losses, 1000u);  // The scenarios do lose data, and it shows.
}

TEST(TraceBufferModelTest, ACopyOnWriteCloneReadsAsTheBufferWasWhateverIsWrittenMeanwhile) {
  uint64_t checked = 0, written_over = 0;
  for (uint32_t seed = 0; seed < 3000; seed++) {
    // Long scripts on small buffers: clones in progress while the writers
    // wrap, overwrite, patch, recommit and read.
    const std::vector<uint8_t> script = RandomScript(200000 + seed, 160);
    HarnessResult r = RunScript(script, 4096 * (1 + seed % 4));
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
    checked += r.cow_clones_checked;
    written_over += r.cow_clones_written_over;
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_GT(written_over, 500u);
}

TEST(TraceBufferModelTest, AnEverythingCloneRereadsInOrderAndEndsWithWhatIsUnread) {
  uint64_t checked = 0, reread = 0;
  for (uint32_t seed = 0; seed < 2000; seed++) {
    const std::vector<uint8_t> script = RandomScript(300000 + seed, 120);
    HarnessResult r = RunScript(script, 4096 * (1 + seed % 4));
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
    checked += r.everything_clones_checked;
    reread += r.everything_clone_packets_reread;
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_GT(reread, 1000u);  // The drains had read much of what the clones hold.
}

TEST(TraceBufferModelTest, OutOfOrderBatches) {
  ScriptBuilder b({4, 4, 4, 4, 4, 4});
  for (uint8_t order = 0; order < 16; order++) {
    b.Write(0, 4, 300).Write(1, 2, 500).Flush(0, order).Flush(1, order).ReadAll();
  }
  HarnessResult r = RunScript(b.bytes(), 1 << 20);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.packets_checked_against_model, 16u * 6);
}

TEST(TraceBufferModelTest, RecommitOfAScrapedChunk) {
  ScriptBuilder b({15, 15, 15, 15, 15, 15});
  b.Write(0, 3, 40).Scrape(0).ReadAll().Write(0, 2, 40).Scrape(0).ReadSome(1, true);
  b.Write(0, 1, 40).Flush(0).ReadAll();
  HarnessResult r = RunScript(b.bytes(), 1 << 20);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.packets_checked_against_model, 6u);
}

TEST(TraceBufferModelTest, PatchAfterPartialRead) {
  ScriptBuilder b({0, 0, 0, 0, 0, 0});  // 64-byte chunks: packets split.
  b.TogglePatching(0).Write(0, 1, 30).Write(0, 1, 200).Write(0, 1, 30).Flush(0);
  b.ReadSome(1, true).ReadAll().Patch(0, 1).ReadAll().Patch(0, 3).ReadAll();
  HarnessResult r = RunScript(b.bytes(), 1 << 20);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.packets_checked_against_model, 3u);
}

TEST(TraceBufferModelTest, EmptyChunksInsideSplitPackets) {
  ScriptBuilder b({0, 0, 1, 1, 15, 15});  // Small chunks: packets split.
  b.ToggleEmptyChunks(0).ToggleEmptyChunks(2).TogglePatching(2);
  b.Write(0, 3, 200).Write(2, 2, 300).Flush(0, 1).Flush(2).ReadAll();
  b.Patch(2, 3).Patch(2, 3).ReadAll().Write(0, 1, 150).Scrape(0).ReadAll().Flush(0, 3).ReadAll();
  HarnessResult r = RunScript(b.bytes(), 1 << 20);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.packets_checked_against_model, 6u);
  EXPECT_EQ(r.losses_flagged, 0u);
}

TEST(TraceBufferModelTest, SequencesWhoseChunkIdsStartAboveZero) {
  // First ChunkIDs 0x11111111, 0x55555555 and 0xffffffff (wraps at once).
  ScriptBuilder b({0x14, 0x54, 0xf0, 0xf4, 4, 4});
  for (uint8_t seq = 0; seq < 4; seq++) b.Write(seq, 3, 200).Flush(seq, seq);
  b.ReadSome(2, true).Scrape(1).ReadAll();
  for (uint8_t seq = 0; seq < 4; seq++) b.Write(seq, 1, 40).Flush(seq);
  b.ReadAll();
  HarnessResult r = RunScript(b.bytes(), 1 << 20);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.packets_checked_against_model, 16u);
  EXPECT_EQ(r.losses_flagged, 0u);
}

TEST(TraceBufferModelTest, OverwriteOfAStalledChunk) {
  ScriptBuilder b({15, 15, 15, 15, 15, 15});
  // Sequence 0 stalls on a patch that never comes; sequence 1 wraps the ring.
  b.TogglePatching(0).Write(0, 1, 2000).Flush(0).ReadAll();
  for (int i = 0; i < 20; i++) b.Write(1, 2, 900).Flush(1);
  b.Write(0, 2, 100).Flush(0).ReadAll();
  HarnessResult r = RunScript(b.bytes(), 8192);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_TRUE(r.wrapped);
  EXPECT_GT(r.losses_flagged, 0u);
}

}  // namespace
}  // namespace ringside::buffer::testing
