#include "buffer/trace_buffer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "buffer/chunk_abi.h"
#include "gtest/gtest.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::buffer {
namespace {

using OverwritePolicy = TraceBuffer::OverwritePolicy;

constexpr uint32_t kTBChunkHeader = 20;  // Bytes the buffer adds to each chunk.

// A chunk whose stored size is exactly `outer` bytes: one fragment of filler.
ChunkBuilder ChunkOfOuterSize(ChunkID id, WriterID w, uint32_t outer, char fill) {
  ChunkBuilder b(id, w);
  b.AddFragment(std::string(outer - kTBChunkHeader - kFragmentHeaderSize, fill));
  return b;
}

struct ReadPacket {
  ProducerID producer = 0;
  WriterID writer = 0;
  std::string data;
  uint32_t loss = 0;
};

class TraceBufferTest : public ::testing::Test {
 protected:
  void CreateBuffer(size_t size, OverwritePolicy policy = OverwritePolicy::kOverwrite) {
    buf_ = TraceBuffer::Create(size, policy);
    ASSERT_NE(buf_, nullptr);
  }

  void Commit(ProducerID p, const ChunkBuilder& b, bool complete = true) {
    buf_->CopyChunkUntrusted(p, ClientIdentity{1000, 42}, b.writer_id(), b.chunk_id(),
                             b.num_fragments(), b.flags(), complete, b.payload_data(),
                             b.payload().size());
  }

  static std::vector<ReadPacket> ReadAllFrom(TraceBuffer* buffer) {
    std::vector<ReadPacket> out;
    buffer->BeginRead();
    TracePacket packet;
    PacketSequenceProperties props;
    uint32_t loss = 0;
    while (buffer->ReadNextTracePacket(&packet, &props, &loss)) {
      EXPECT_EQ(props.client_identity_trusted.uid, 1000u);
      out.push_back(
          ReadPacket{props.producer_id_trusted, props.writer_id, packet.ToString(), loss});
    }
    return out;
  }
  std::vector<ReadPacket> ReadAll() { return ReadAllFrom(buf_.get()); }

  // Just the packet contents, in read order.
  std::vector<std::string> ReadData() {
    std::vector<std::string> data;
    for (const ReadPacket& p : ReadAll()) data.push_back(p.data);
    return data;
  }

  void TearDown() override {
    if (!buf_) return;
    const TraceBuffer::Stats& s = buf_->stats();
    // Every chunk written is at most once read or overwritten.
    EXPECT_LE(s.chunks_read + s.chunks_overwritten, s.chunks_written + s.chunks_relocated);
    EXPECT_LE(s.bytes_read + s.bytes_overwritten, s.bytes_written);
    EXPECT_LE(s.padding_bytes_cleared, s.padding_bytes_written);
    EXPECT_LE(buf_->used_size(), buf_->size());
    EXPECT_EQ(s.buffer_size, buf_->size());
  }

  std::unique_ptr<TraceBuffer> buf_;
};

std::vector<std::string> Data(std::initializer_list<const char*> items) {
  return std::vector<std::string>(items.begin(), items.end());
}

// --- Creation ----------------------------------------------------------------

TEST_F(TraceBufferTest, CreateRoundsSizesBelowAPageUpToOnePage) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{4095}}) {
    auto b = TraceBuffer::Create(size);
    ASSERT_NE(b, nullptr) << size;
    EXPECT_EQ(b->size(), 4096u) << size;
    EXPECT_EQ(b->stats().buffer_size, 4096u) << size;
  }
  // And it is a working buffer.
  CreateBuffer(10);
  Commit(1, ChunkBuilder(0, 1).AddFragment("small"));
  EXPECT_EQ(ReadData(), Data({"small"}));
}

TEST_F(TraceBufferTest, CreateRoundsSizesUpToPageMultiples) {
  EXPECT_EQ(TraceBuffer::Create(4096)->size(), 4096u);
  EXPECT_EQ(TraceBuffer::Create(4097)->size(), 8192u);
  auto b = TraceBuffer::Create(5000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->size(), 8192u);
  EXPECT_FALSE(b->has_data());
  EXPECT_EQ(b->used_size(), 0u);
}

TEST_F(TraceBufferTest, CreateRejectsSizesBeyond32BitOffsets) {
  EXPECT_EQ(TraceBuffer::Create(size_t{8} << 30), nullptr);
  EXPECT_EQ(TraceBuffer::Create(TraceBuffer::kMaxSize + 1), nullptr);
}

// --- Basic writing and reading -----------------------------------------------

TEST_F(TraceBufferTest, ReadsBackWholePacketsOfASequenceInOrder) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("p1").AddFragment("p2"));
  Commit(1, ChunkBuilder(1, 1).AddFragment("p3"));
  EXPECT_TRUE(buf_->has_data());
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data, "p1");
  EXPECT_EQ(r[2].data, "p3");
  for (const ReadPacket& p : r) EXPECT_EQ(p.loss, 0u);
  EXPECT_FALSE(buf_->has_data());
  EXPECT_EQ(buf_->stats().chunks_read, 2u);
  // Reading is destructive.
  EXPECT_TRUE(ReadAll().empty());
}

TEST_F(TraceBufferTest, PacketsOfDifferentSequencesComeOutInBufferOrder) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("A1"));
  Commit(2, ChunkBuilder(0, 1).AddFragment("B1"));
  Commit(1, ChunkBuilder(1, 1).AddFragment("A2"));
  Commit(1, ChunkBuilder(0, 2).AddFragment("C1"));
  EXPECT_EQ(ReadData(), Data({"A1", "B1", "A2", "C1"}));
}

TEST_F(TraceBufferTest, UnfragmentedPacketIsASliceOfTheBuffer) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("zero-copy"));
  buf_->BeginRead();
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss;
  ASSERT_TRUE(buf_->ReadNextTracePacket(&packet, &props, &loss));
  ASSERT_EQ(packet.slices().size(), 1u);
  std::string framed;
  packet.AppendFramedTo(&framed);
  EXPECT_EQ(framed, std::string("\x0a\x09zero-copy", 11));
}

TEST_F(TraceBufferTest, ChunksAreStoredFourByteAlignedWithTheirHeader) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("x"));  // 20 + 4 + 1 -> 28.
  EXPECT_EQ(buf_->stats().bytes_written, 28u);
  EXPECT_EQ(buf_->used_size(), 28u);
  Commit(1, ChunkBuilder(1, 1).AddFragment("xyz"));  // 20 + 4 + 3 -> 28.
  EXPECT_EQ(buf_->used_size(), 56u);
}

TEST_F(TraceBufferTest, EmptyPacketsAreSkipped) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("").AddFragment("a"));
  EXPECT_EQ(ReadData(), Data({"a"}));
}

// --- Ring buffer: wrap, overwrite, padding -----------------------------------

TEST_F(TraceBufferTest, WrapOverwritesOldestChunksAndFlagsTheLoss) {
  CreateBuffer(4096);
  // Ten chunks of 1000 bytes: the buffer holds four.
  for (ChunkID id = 0; id < 10; id++) {
    Commit(1, ChunkOfOuterSize(id, 1, 1000, static_cast<char>('a' + id)));
  }
  const TraceBuffer::Stats& s = buf_->stats();
  EXPECT_EQ(s.chunks_written, 10u);
  EXPECT_EQ(s.write_wrap_count, 2u);
  EXPECT_EQ(s.chunks_overwritten, 6u);
  EXPECT_EQ(s.bytes_overwritten, 6000u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].data[0], 'g');
  EXPECT_EQ(r[3].data[0], 'j');
  EXPECT_EQ(r[0].loss, kDataLossPresent | kDataLossOverwrite);
  EXPECT_EQ(r[1].loss, 0u);
}

TEST_F(TraceBufferTest, ReaderThatKeepsUpAcrossWrapsSeesNoLoss) {
  CreateBuffer(4096);
  std::vector<std::string> got;
  for (ChunkID id = 0; id < 50; id++) {
    Commit(1, ChunkOfOuterSize(id, 1, 700 + 4 * (id % 5), 'x'));
    for (const ReadPacket& p : ReadAll()) {
      EXPECT_EQ(p.loss, 0u);
      got.push_back(p.data);
    }
  }
  EXPECT_EQ(got.size(), 50u);
  EXPECT_GT(buf_->stats().write_wrap_count, 5u);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
  EXPECT_EQ(buf_->stats().bytes_overwritten, 0u);
}

TEST_F(TraceBufferTest, FullyReadChunkThatIsOverwrittenIsNotALoss) {
  CreateBuffer(4096);
  Commit(1, ChunkOfOuterSize(0, 1, 2000, 'a'));
  ASSERT_EQ(ReadAll().size(), 1u);
  Commit(1, ChunkOfOuterSize(1, 1, 2000, 'b'));
  Commit(1, ChunkOfOuterSize(2, 1, 2000, 'c'));  // Wraps over chunk 0.
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
}

TEST_F(TraceBufferTest, PartialOverwriteLeavesPaddingThatIsSkipped) {
  CreateBuffer(4096);
  Commit(1, ChunkOfOuterSize(0, 1, 3000, 'a'));
  Commit(2, ChunkOfOuterSize(0, 1, 1000, 'b'));
  // Wraps and overwrites half of chunk A0: the rest of it becomes padding.
  Commit(3, ChunkOfOuterSize(0, 1, 1500, 'c'));
  EXPECT_EQ(buf_->stats().padding_bytes_written, 1500u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data[0], 'b');
  EXPECT_EQ(r[1].data[0], 'c');
  // Writing over the padding clears it.
  Commit(3, ChunkOfOuterSize(1, 1, 2000, 'd'));
  EXPECT_EQ(buf_->stats().padding_bytes_cleared, 1500u);
}

TEST_F(TraceBufferTest, PaddingCanBeSmallerThanAChunkHeader) {
  CreateBuffer(4096);
  Commit(1, ChunkOfOuterSize(0, 1, 1004, 'a'));
  Commit(1, ChunkOfOuterSize(1, 1, 3000, 'b'));
  Commit(2, ChunkOfOuterSize(0, 1, 1000, 'c'));  // Leaves 4 bytes of A0 as padding.
  EXPECT_EQ(buf_->stats().padding_bytes_written, 4u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data[0], 'b');
  EXPECT_EQ(r[1].data[0], 'c');
}

// Many interleaved writers, chunks of different sizes (so that each write
// overwrites one, two or part of older chunks), a reader that stops in the
// middle of chunks, the ring wrapping many times: every sequence stays FIFO,
// a loss is flagged exactly where packets are missing, and a chunk counts as
// overwritten exactly when some of its packets were never read.
TEST_F(TraceBufferTest, ManySequencesWrappingManyTimesStayFifoWithExactStats) {
  constexpr int kWriters = 100;
  for (uint32_t seed = 0; seed < 10; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    CreateBuffer(64 << 10);
    struct Writer {
      ProducerID producer = 0;
      WriterID writer = 0;
      ChunkID next_id = 0;
      uint32_t next_packet = 0;
      int64_t last_read = -1;
      std::vector<bool> read;  // By packet number.
    };
    struct ChunkRecord {
      size_t writer;
      uint32_t first_packet;
      uint32_t packets;
      uint64_t outer_size;
    };
    std::vector<ChunkRecord> chunk_records;
    std::vector<Writer> writers;
    for (int i = 0; i < kWriters; i++) {
      Writer& w = writers.emplace_back();
      w.producer = static_cast<ProducerID>(1 + i % 3);
      w.writer = static_cast<WriterID>(i);
    }
    uint64_t bytes = 0;
    auto read_some = [&](size_t max_packets) {
      buf_->BeginRead();
      TracePacket packet;
      PacketSequenceProperties props;
      uint32_t loss = 0;
      for (size_t n = 0; n < max_packets && buf_->ReadNextTracePacket(&packet, &props, &loss);
           n++) {
        const std::string data = packet.ToString();
        int producer = 0, writer = 0;
        uint32_t number = 0;
        ASSERT_EQ(std::sscanf(data.c_str(), "%d/%d/%u", &producer, &writer, &number), 3) << data;
        ASSERT_EQ(producer, props.producer_id_trusted);
        ASSERT_EQ(writer, props.writer_id);
        Writer& w = writers[static_cast<size_t>(writer)];
        ASSERT_GT(int64_t{number}, w.last_read) << data;  // FIFO, no duplicates.
        const bool gap = int64_t{number} != w.last_read + 1;
        EXPECT_EQ(loss != 0, gap) << data << " loss " << loss;
        w.last_read = number;
        w.read[number] = true;
      }
    };
    for (int i = 0; i < 6000; i++) {
      const size_t index = rng() % kWriters;
      Writer& w = writers[index];
      ChunkBuilder b(w.next_id++, w.writer);
      const uint32_t first = w.next_packet;
      const int packets = 1 + static_cast<int>(rng() % 4);
      for (int p = 0; p < packets; p++) {
        std::string data = std::to_string(w.producer) + "/" + std::to_string(w.writer) + "/" +
                           std::to_string(w.next_packet++) + "/";
        data.resize(data.size() + rng() % 700, 'x');
        b.AddFragment(data);
      }
      w.read.resize(w.next_packet, false);
      Commit(w.producer, b);
      const uint64_t outer = (kTBChunkHeader + b.payload().size() + 3) & ~size_t{3};
      chunk_records.push_back(ChunkRecord{index, first, static_cast<uint32_t>(packets), outer});
      bytes += outer;
      if (rng() % 16 == 0) read_some(rng() % 40);
      if (HasFatalFailure()) return;
    }
    read_some(SIZE_MAX);
    if (HasFatalFailure()) return;

    // A chunk is lost to the ring if any of its packets was never read.
    uint64_t lost_chunks = 0, lost_bytes = 0;
    for (const ChunkRecord& c : chunk_records) {
      const std::vector<bool>& read = writers[c.writer].read;
      for (uint32_t p = c.first_packet; p < c.first_packet + c.packets; p++) {
        if (!read[p]) {
          lost_chunks++;
          lost_bytes += c.outer_size;
          break;
        }
      }
    }
    const TraceBuffer::Stats& s = buf_->stats();
    EXPECT_GT(s.write_wrap_count, 20u);
    EXPECT_EQ(s.chunks_written, chunk_records.size());
    EXPECT_EQ(s.bytes_written, bytes);
    EXPECT_EQ(s.chunks_overwritten, lost_chunks);
    EXPECT_EQ(s.bytes_overwritten, lost_bytes);
    EXPECT_EQ(s.data_loss_overwrite, lost_chunks);
    // A chunk whose last packet was read, then overwritten before a read
    // moved past it, counts as neither read nor overwritten.
    EXPECT_LE(s.chunks_read, chunk_records.size() - lost_chunks);
    EXPECT_LE(s.bytes_read, bytes - lost_bytes);
    EXPECT_EQ(s.chunks_discarded + s.chunks_relocated + s.abi_violations, 0u);
    EXPECT_FALSE(buf_->has_data());
  }
}

// --- DISCARD -----------------------------------------------------------------

TEST_F(TraceBufferTest, DiscardStopsAcceptingAtTheEndReadOrNot) {
  CreateBuffer(4096, OverwritePolicy::kDiscard);
  for (ChunkID id = 0; id < 4; id++) Commit(1, ChunkOfOuterSize(id, 1, 1000, 'a'));
  EXPECT_EQ(ReadAll().size(), 4u);
  // Even though everything was read, the end was reached: nothing more.
  Commit(1, ChunkOfOuterSize(4, 1, 1000, 'b'));
  Commit(1, ChunkOfOuterSize(5, 1, 40, 'c'));
  EXPECT_EQ(buf_->stats().chunks_discarded, 2u);
  EXPECT_EQ(buf_->stats().write_wrap_count, 0u);
  EXPECT_TRUE(ReadAll().empty());
}

TEST_F(TraceBufferTest, DiscardLossIsNotFlaggedOnPacketsWrittenBeforeTheRefusedChunk) {
  CreateBuffer(4096, OverwritePolicy::kDiscard);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b"));
  Commit(2, ChunkOfOuterSize(0, 1, 4000, 'f'));
  Commit(1, ChunkBuilder(1, 1).AddFragment(std::string(200, 'c')));  // Does not fit.
  EXPECT_EQ(buf_->stats().chunks_discarded, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data, "a");
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].data, "b");
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(r[2].data[0], 'f');
  EXPECT_EQ(r[2].loss, 0u);
}

TEST_F(TraceBufferTest, DiscardLossIsFlaggedOnTheFirstPacketAfterTheRefusedChunk) {
  CreateBuffer(4096, OverwritePolicy::kDiscard);
  // An out-of-order batch: chunk 1 gets in, chunk 0 then finds the buffer full.
  Commit(2, ChunkOfOuterSize(0, 1, 3900, 'f'));
  Commit(1, ChunkBuilder(1, 1).AddFragment("b").AddFragment("c"));
  Commit(1, ChunkBuilder(0, 1).AddFragment(std::string(200, 'a')));
  EXPECT_EQ(buf_->stats().chunks_discarded, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data[0], 'f');
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].data, "b");
  EXPECT_EQ(r[1].loss, kDataLossPresent);
  EXPECT_EQ(r[2].data, "c");
  EXPECT_EQ(r[2].loss, 0u);
}

// --- Fragmentation -----------------------------------------------------------

TEST_F(TraceBufferTest, ReassemblesPacketFragmentedOverManyChunks) {
  CreateBuffer(8192);
  Commit(1, ChunkBuilder(0, 1).AddFragment("before").AddFragment("he").set_flags(
                kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1).AddFragment("ll").set_flags(kFirstPacketContinuesFromPrevChunk |
                                                           kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(2, 1).AddFragment("o,").set_flags(kFirstPacketContinuesFromPrevChunk |
                                                           kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(3, 1).AddFragment(" world").AddFragment("after").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data, "before");
  EXPECT_EQ(r[1].data, "hello, world");
  EXPECT_EQ(r[2].data, "after");
  for (const ReadPacket& p : r) EXPECT_EQ(p.loss, 0u);
  EXPECT_EQ(buf_->stats().readaheads_succeeded, 1u);
  EXPECT_EQ(buf_->stats().chunks_read, 4u);
}

TEST_F(TraceBufferTest, FragmentedPacketWaitsForItsLastChunk) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b1").set_flags(
                kLastPacketContinuesOnNextChunk));
  Commit(2, ChunkBuilder(0, 1).AddFragment("other"));
  EXPECT_EQ(ReadData(), Data({"a", "other"}));
  EXPECT_EQ(buf_->stats().readaheads_failed, 1u);
  Commit(1, ChunkBuilder(1, 1).AddFragment("b2").set_flags(kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "b1b2");
  EXPECT_EQ(r[0].loss, 0u);
}

TEST_F(TraceBufferTest, EmptyChunkInTheMiddleOfAFragmentChainIsSkipped) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1));  // An idle writer's flush: no fragments.
  Commit(1, ChunkBuilder(2, 1).AddFragment("b").AddFragment("c").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "ab");
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].data, "c");
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(buf_->stats().data_loss_reassembly_broken_chain, 0u);
  EXPECT_EQ(buf_->stats().readaheads_succeeded, 1u);
  EXPECT_EQ(buf_->stats().chunks_read, 3u);
  EXPECT_FALSE(buf_->has_data());
}

TEST_F(TraceBufferTest, EmptyChunksInALongerFragmentChainAreSkipped) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1));
  Commit(1, ChunkBuilder(2, 1).AddFragment("b").set_flags(kFirstPacketContinuesFromPrevChunk |
                                                          kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(3, 1));
  Commit(1, ChunkBuilder(4, 1));
  Commit(1, ChunkBuilder(5, 1).AddFragment("c").AddFragment("d").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "abc");
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].data, "d");
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(buf_->stats().chunks_read, 6u);
}

TEST_F(TraceBufferTest, FragmentChainWaitsPastAnEmptyChunkForItsEnd) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1));
  EXPECT_TRUE(ReadAll().empty());
  Commit(1, ChunkBuilder(2, 1).AddFragment("b").set_flags(kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "ab");
  EXPECT_EQ(r[0].loss, 0u);
}

TEST_F(TraceBufferTest, ReassemblesAcrossTheWrapPoint) {
  CreateBuffer(4096);
  Commit(9, ChunkOfOuterSize(0, 1, 2800, 'z'));
  ASSERT_EQ(ReadAll().size(), 1u);
  // Chunk 0 of seq 1 sits at the end of the buffer, chunk 1 wraps to 0.
  ChunkBuilder first(0, 1);
  first.AddFragment(std::string(900, 'h')).set_flags(kLastPacketContinuesOnNextChunk);
  Commit(1, first);
  ChunkBuilder second(1, 1);
  second.AddFragment(std::string(900, 't')).set_flags(kFirstPacketContinuesFromPrevChunk);
  Commit(1, second);
  EXPECT_EQ(buf_->stats().write_wrap_count, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, std::string(900, 'h') + std::string(900, 't'));
  EXPECT_EQ(r[0].loss, 0u);
}

// --- Out-of-order commits and ChunkIDs ---------------------------------------

TEST_F(TraceBufferTest, OutOfOrderBatchIsReadInChunkIdOrder) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("c0"));
  Commit(1, ChunkBuilder(2, 1).AddFragment("c2"));
  Commit(2, ChunkBuilder(0, 1).AddFragment("other"));
  Commit(1, ChunkBuilder(1, 1).AddFragment("c1"));
  EXPECT_EQ(buf_->stats().chunks_committed_out_of_order, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].data, "c0");
  // The outer walk meets c2 first; the inner walk reads c1 before it.
  EXPECT_EQ(r[1].data, "c1");
  EXPECT_EQ(r[2].data, "c2");
  EXPECT_EQ(r[3].data, "other");
  for (const ReadPacket& p : r) EXPECT_EQ(p.loss, 0u);
}

TEST_F(TraceBufferTest, ChunkIdGapAfterSortingIsAReadGapLoss) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("c0"));
  Commit(1, ChunkBuilder(3, 1).AddFragment("c3"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].loss, kDataLossPresent | kDataLossReadGap);
  EXPECT_EQ(buf_->stats().data_loss_read_gap, 1u);
  EXPECT_EQ(buf_->stats().data_loss_missing_chunks, 2u);
}

TEST_F(TraceBufferTest, FirstChunkOfASequenceAboveZeroIsNotALoss) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(5, 1).AddFragment("late"));
  Commit(1, ChunkBuilder(6, 1).AddFragment("next"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "late");
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(buf_->stats().data_loss_read_gap, 0u);
  EXPECT_EQ(buf_->stats().data_loss_missing_chunks, 0u);
}

TEST_F(TraceBufferTest, GapAfterTheFirstChunkAboveZeroIsALoss) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(5, 1).AddFragment("late"));
  Commit(1, ChunkBuilder(8, 1).AddFragment("after-gap"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].loss, kDataLossPresent | kDataLossReadGap);
  EXPECT_EQ(buf_->stats().data_loss_missing_chunks, 2u);
}

TEST_F(TraceBufferTest, WriterReturningAfterItsSequenceStateWasSweptIsNotFlagged) {
  CreateBuffer(1 << 20);
  Commit(1, ChunkBuilder(0, 0).AddFragment("first"));
  ASSERT_EQ(ReadAll().size(), 1u);
  // More than kKeepLastEmptySeq newer sequences empty out: writer 0's state,
  // and the ChunkID it last consumed, are swept.
  for (WriterID w = 1; w <= TraceBuffer::kKeepLastEmptySeq + 10; w++) {
    Commit(1, ChunkBuilder(0, w).AddFragment("x"));
    ReadAll();
  }
  // Its chunk 1 follows chunk 0, which was read whole: nothing was lost.
  Commit(1, ChunkBuilder(1, 0).AddFragment("second"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "second");
  EXPECT_EQ(r[0].loss, 0u);
}

TEST_F(TraceBufferTest, ChunkIdsWrapAroundAt2To32) {
  CreateBuffer(8192);
  const ChunkID ids[] = {0xfffffffe, 0xffffffff, 0, 1};
  Commit(1, ChunkBuilder(ids[0], 1).AddFragment("a"));
  Commit(1, ChunkBuilder(ids[1], 1).AddFragment("b1").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1,
         ChunkBuilder(ids[2], 1).AddFragment("b2").set_flags(kFirstPacketContinuesFromPrevChunk));
  Commit(1, ChunkBuilder(ids[3], 1).AddFragment("c"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data, "a");
  EXPECT_EQ(r[1].data, "b1b2");
  EXPECT_EQ(r[2].data, "c");
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(r[2].loss, 0u);
}

TEST_F(TraceBufferTest, OutOfOrderAcrossChunkIdWrapSortsCorrectly) {
  CreateBuffer(8192);
  Commit(1, ChunkBuilder(0xffffffff, 1).AddFragment("x"));
  ReadAll();
  Commit(1, ChunkBuilder(1, 1).AddFragment("b"));
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "a");
  EXPECT_EQ(r[1].data, "b");
  EXPECT_EQ(r[0].loss, 0u);
}

// ChunkIDs order modulo 2^32 only within half the circle: a producer whose
// chunks in the buffer would span more (no real writer can: the buffer holds
// far fewer chunks) must not make the queue's order ambiguous, or one
// ChunkID could be stored twice and a recommit go unrecognised.
TEST_F(TraceBufferTest, ChunkIdsSpanningHalfTheCircleAreRefused) {
  CreateBuffer(8192);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  Commit(1, ChunkBuilder(0x7fffffff, 1).AddFragment("c"));
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
  // After 0x7fffffff, but as far before 0: refused.
  Commit(1, ChunkBuilder(0xfffffffe, 1).AddFragment("x"));
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  // Between the two: stored once, and its second commit is a recommit.
  Commit(1, ChunkBuilder(0x7ffffffd, 1).AddFragment("b"));
  Commit(1, ChunkBuilder(0x7ffffffd, 1).AddFragment("b"));
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  EXPECT_EQ(buf_->stats().chunks_rewritten, 1u);
  EXPECT_EQ(buf_->stats().chunks_written, 3u);
  EXPECT_EQ(ReadData(), Data({"a", "b", "c"}));
}

// Before the front, the same: within half the circle of the newest chunk
// it is an out-of-order commit, beyond it a violation.
TEST_F(TraceBufferTest, AChunkIdFarBeforeTheOldestIsRefused) {
  CreateBuffer(8192);
  Commit(1, ChunkBuilder(0x40000000, 1).AddFragment("b"));
  Commit(1, ChunkBuilder(0x60000000, 1).AddFragment("c"));
  Commit(1, ChunkBuilder(0xe0000000, 1).AddFragment("x"));  // 2^31 before the newest.
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  Commit(1, ChunkBuilder(0xe0000001, 1).AddFragment("a"));  // 2^31 - 1 before it.
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  EXPECT_EQ(buf_->stats().chunks_committed_out_of_order, 1u);
  EXPECT_EQ(ReadData(), Data({"a", "b", "c"}));
}

// --- Losses ------------------------------------------------------------------

TEST_F(TraceBufferTest, DropPacketMarkerFlagsWriterAbortOnTheNextPacket) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  Commit(1, ChunkBuilder(1, 1).AddDropMarker().AddFragment("b").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].data, "b");
  EXPECT_EQ(r[1].loss, kDataLossPresent | kDataLossWriterAbort);
  EXPECT_EQ(buf_->stats().trace_writer_packet_loss, 1u);
}

TEST_F(TraceBufferTest, DropMarkerInsideAFragmentedPacketAbortsOnlyThatPacket) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("half").set_flags(
                kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1).AddDropMarker().AddFragment("b").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "a");
  EXPECT_EQ(r[1].data, "b");
  EXPECT_EQ(r[1].loss, kDataLossPresent | kDataLossWriterAbort);
}

TEST_F(TraceBufferTest, MissingMiddleChunkIsAReassemblyGap) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("p1").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(2, 1).AddFragment("p3").AddFragment("next").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "next");
  EXPECT_TRUE(r[0].loss & kDataLossReassemblyGap);
  EXPECT_TRUE(r[0].loss & kDataLossPresent);
  EXPECT_EQ(buf_->stats().data_loss_reassembly_gap, 1u);
}

TEST_F(TraceBufferTest, ContinuationWithoutItsFlagIsABrokenChain) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("p1").set_flags(kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1).AddFragment("whole"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "whole");
  EXPECT_EQ(r[0].loss, kDataLossPresent | kDataLossReassemblyBrokenChain);
}

TEST_F(TraceBufferTest, ContinuationWithoutItsBeginningIsAnOrphan) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("tail").AddFragment("ok").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "ok");
  EXPECT_EQ(r[0].loss, kDataLossPresent | kDataLossOrphanContinuation);
}

TEST_F(TraceBufferTest, LossIsReportedOnlyOnItsOwnSequence) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a0"));
  Commit(2, ChunkBuilder(0, 1).AddFragment("b0"));
  Commit(1, ChunkBuilder(2, 1).AddFragment("a2"));
  Commit(2, ChunkBuilder(1, 1).AddFragment("b1"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 4u);
  for (const ReadPacket& p : r) {
    EXPECT_EQ(p.loss != 0, p.data == "a2") << p.data;
  }
}

// --- Hostile producers -------------------------------------------------------

TEST_F(TraceBufferTest, FragmentSizePastTheEndIsAnAbiViolationAndEarlierFragmentsRead) {
  CreateBuffer(4096);
  ChunkBuilder b(0, 1);
  b.AddFragment("good").AddRawBytes(std::string("\x84\x80\x80\x00xx", 6)).set_num_fragments(2);
  Commit(1, b);
  Commit(1, ChunkBuilder(1, 1).AddFragment("later"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "good");
  EXPECT_EQ(r[0].loss, 0u);
  EXPECT_EQ(r[1].data, "later");
  EXPECT_EQ(r[1].loss, kDataLossPresent | kDataLossChunkCorrupted);
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
}

TEST_F(TraceBufferTest, JumboVarintFragmentSizeIsAnAbiViolation) {
  CreateBuffer(4096);
  ChunkBuilder b(0, 1);
  b.AddFragment("ok").AddRawBytes(std::string("\x81\x80\x80\x80\x00z", 6)).set_num_fragments(2);
  Commit(1, b);
  EXPECT_EQ(ReadData(), Data({"ok"}));
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
}

TEST_F(TraceBufferTest, FragmentCountBeyondTheContentIsAnAbiViolation) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b").set_num_fragments(9));
  EXPECT_EQ(ReadData(), Data({"a", "b"}));
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
}

TEST_F(TraceBufferTest, NonRedundantShortVarintSizesAreAccepted) {
  CreateBuffer(4096);
  ChunkBuilder b(0, 1);
  b.AddRawBytes(std::string("\x03"
                            "abc"
                            "\x82\x00"
                            "de",
                            8))
      .set_num_fragments(2);
  Commit(1, b);
  EXPECT_EQ(ReadData(), Data({"abc", "de"}));
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
}

TEST_F(TraceBufferTest, OversizedChunkIsRefusedAndFlagged) {
  CreateBuffer(1 << 20);
  std::string huge(kMaxChunkPayloadSize + 1, 'x');
  buf_->CopyChunkUntrusted(1, ClientIdentity{1000, 1}, 1, 0, 1, 0, true,
                           reinterpret_cast<const uint8_t*>(huge.data()), huge.size());
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  EXPECT_EQ(buf_->stats().chunks_written, 0u);
  Commit(1, ChunkBuilder(1, 1).AddFragment("next"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].loss & kDataLossChunkCorrupted);
}

TEST_F(TraceBufferTest, ZeroSizedChunkKeepsChunkIdsContiguous) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  Commit(1, ChunkBuilder(1, 1));  // No fragments, no payload.
  Commit(1, ChunkBuilder(2, 1).AddFragment("c"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].loss, 0u);
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
}

TEST_F(TraceBufferTest, UnknownChunkFlagsAreAnAbiViolation) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").set_flags(0x20));
  EXPECT_EQ(ReadData(), Data({"a"}));
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
}

TEST_F(TraceBufferTest, RandomGarbageChunksNeverCrashAndValidDataStillReads) {
  for (uint32_t seed = 0; seed < 200; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    CreateBuffer(4096 * (1 + seed % 4));
    for (int i = 0; i < 40; i++) {
      std::string garbage(rng() % 3000, '\0');
      for (char& c : garbage) c = static_cast<char>(rng());
      buf_->CopyChunkUntrusted(static_cast<ProducerID>(rng() % 3), ClientIdentity{1000, 1},
                               static_cast<WriterID>(rng() % 3), rng() % 8,
                               static_cast<uint16_t>(rng() % 1100), static_cast<uint8_t>(rng()),
                               rng() % 2, reinterpret_cast<const uint8_t*>(garbage.data()),
                               garbage.size());
      if (rng() % 4 == 0) {
        TraceBuffer::Patch patch{rng() % 4000, {1, 2, 3, 4}};
        buf_->TryPatchChunkContents(static_cast<ProducerID>(rng() % 3),
                                    static_cast<WriterID>(rng() % 3), rng() % 8, &patch, 1,
                                    rng() % 2);
      }
      if (rng() % 3 == 0) ReadAll();
    }
    // A well-behaved sequence keeps working next to the garbage.
    Commit(77, ChunkBuilder(0, 1).AddFragment("valid"));
    std::vector<ReadPacket> r = ReadAll();
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r.back().data, "valid");
    EXPECT_EQ(r.back().producer, 77);
    TearDown();
  }
}

// --- Patches -----------------------------------------------------------------

TEST_F(TraceBufferTest, PatchStallsOnlyItsSequence) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1)
                .AddFragment("a0")
                .AddFragment("XXXX-begin")
                .set_flags(kLastPacketContinuesOnNextChunk | kChunkNeedsPatching));
  Commit(1, ChunkBuilder(1, 1).AddFragment("-end").set_flags(kFirstPacketContinuesFromPrevChunk));
  Commit(2, ChunkBuilder(0, 1).AddFragment("b0"));
  Commit(2, ChunkBuilder(1, 1).AddFragment("b1"));
  // Sequence 1 stalls after a0; sequence 2 is read in full.
  EXPECT_EQ(ReadData(), Data({"a0", "b0", "b1"}));

  // The patch lands in the data of the last fragment: "a0" takes 4 + 2
  // bytes, then the fragment's own 4-byte header.
  TraceBuffer::Patch patch{10, {'D', 'O', 'N', 'E'}};
  EXPECT_TRUE(buf_->TryPatchChunkContents(1, 1, 0, &patch, 1, /*other_patches_pending=*/false));
  EXPECT_EQ(buf_->stats().patches_succeeded, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "DONE-begin-end");
  EXPECT_EQ(r[0].loss, 0u);
}

TEST_F(TraceBufferTest, ChunkStaysStalledWhileOtherPatchesArePending) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("12345678").set_flags(kChunkNeedsPatching));
  TraceBuffer::Patch p1{4, {'a', 'b', 'c', 'd'}};
  EXPECT_TRUE(buf_->TryPatchChunkContents(1, 1, 0, &p1, 1, /*other_patches_pending=*/true));
  EXPECT_TRUE(ReadAll().empty());
  TraceBuffer::Patch p2{8, {'e', 'f', 'g', 'h'}};
  EXPECT_TRUE(buf_->TryPatchChunkContents(1, 1, 0, &p2, 1, /*other_patches_pending=*/false));
  EXPECT_EQ(ReadData(), Data({"abcdefgh"}));
}

TEST_F(TraceBufferTest, PatchAtBadOffsetIsRejectedCountedAndDoesNotStallForever) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a0").AddFragment("open").set_flags(
                kLastPacketContinuesOnNextChunk | kChunkNeedsPatching));
  Commit(1, ChunkBuilder(1, 1).AddFragment("rest").AddFragment("b").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  // Offset 0 is the first fragment's header, not the open fragment's data.
  TraceBuffer::Patch bad{0, {9, 9, 9, 9}};
  EXPECT_FALSE(buf_->TryPatchChunkContents(1, 1, 0, &bad, 1, false));
  TraceBuffer::Patch past_end{12, {9, 9, 9, 9}};
  EXPECT_FALSE(buf_->TryPatchChunkContents(1, 1, 0, &past_end, 1, false));
  EXPECT_EQ(buf_->stats().patches_failed, 2u);
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "a0");
  EXPECT_EQ(r[1].data, "b");
  EXPECT_TRUE(r[1].loss & kDataLossChunkCorrupted);
}

TEST_F(TraceBufferTest, PatchForAChunkNotWaitingForPatchesIsRefused) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a0").AddFragment("open").set_flags(
                kLastPacketContinuesOnNextChunk));
  TraceBuffer::Patch patch{10, {'O', 'P', 'E', 'N'}};
  EXPECT_FALSE(buf_->TryPatchChunkContents(1, 1, 0, &patch, 1, false));
  EXPECT_EQ(buf_->stats().patches_failed, 1u);
  EXPECT_EQ(buf_->stats().patches_succeeded, 0u);
  Commit(1, ChunkBuilder(1, 1).AddFragment("-end").set_flags(kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "a0");
  EXPECT_EQ(r[1].data, "open-end");  // Unchanged.
  EXPECT_EQ(r[1].loss, 0u);
}

TEST_F(TraceBufferTest, PatchOnDataAlreadyReadIsRefused) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a0a0").AddFragment("XXXX").set_flags(
                kLastPacketContinuesOnNextChunk | kChunkNeedsPatching));
  EXPECT_EQ(ReadData(), Data({"a0a0"}));
  // Offset 4 is the data of "a0a0", which was handed out already.
  TraceBuffer::Patch patch{4, {'b', 'a', 'd', '!'}};
  EXPECT_FALSE(buf_->TryPatchChunkContents(1, 1, 0, &patch, 1, false));
  EXPECT_EQ(buf_->stats().patches_failed, 1u);
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
  // The packet that waited for the patch is dropped, and the loss flagged.
  Commit(1, ChunkBuilder(1, 1).AddFragment("-end").AddFragment("b").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "b");
  EXPECT_TRUE(r[0].loss & kDataLossChunkCorrupted);
}

TEST_F(TraceBufferTest, PatchForAChunkNoLongerInTheBufferFails) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  ReadAll();
  TraceBuffer::Patch patch{4, {1, 2, 3, 4}};
  EXPECT_FALSE(buf_->TryPatchChunkContents(1, 1, 0, &patch, 1, false));
  EXPECT_FALSE(buf_->TryPatchChunkContents(5, 5, 0, &patch, 1, false));
  EXPECT_EQ(buf_->stats().patches_failed, 2u);
}

TEST_F(TraceBufferTest, StallEndsWhenThePatchPendingChunkIsOverwritten) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment(std::string(1500, 'p')).set_flags(kChunkNeedsPatching));
  Commit(1, ChunkOfOuterSize(1, 1, 1000, 'q'));
  EXPECT_TRUE(ReadAll().empty());
  Commit(2, ChunkOfOuterSize(0, 1, 1500, 'r'));
  Commit(2, ChunkOfOuterSize(1, 1, 1500, 's'));  // Wraps over chunk 0 of seq 1.
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data[0], 'q');
  EXPECT_EQ(r[0].loss, kDataLossPresent | kDataLossOverwrite);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 1u);
}

// --- Scraped (incomplete) chunks and recommits -------------------------------

TEST_F(TraceBufferTest, LastFragmentOfAScrapedChunkIsNeverRead) {
  CreateBuffer(4096);
  ChunkBuilder b(0, 1);
  b.AddFragment("one").AddFragment("two").AddFragment("thr");
  Commit(1, b, /*complete=*/false);
  EXPECT_EQ(ReadData(), Data({"one", "two"}));
  EXPECT_TRUE(buf_->has_data());
  EXPECT_TRUE(ReadAll().empty());  // Stalled, not erased.
}

TEST_F(TraceBufferTest, FinalCommitAfterPartialReadCompletesWithoutDuplicatesOrLoss) {
  CreateBuffer(4096);
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("one").AddFragment("two").AddFragment("th").PadTo(200);
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), Data({"one", "two"}));
  ChunkBuilder final_chunk(0, 1);
  final_chunk.AddFragment("one").AddFragment("two").AddFragment("three").AddFragment("four");
  Commit(1, final_chunk, true);
  EXPECT_EQ(buf_->stats().chunks_rewritten, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, "three");
  EXPECT_EQ(r[1].data, "four");
  EXPECT_EQ(r[0].loss, 0u);
}

TEST_F(TraceBufferTest, FinalCommitBeforeAnyReadReadsEverythingOnce) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b").PadTo(100), false);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b").AddFragment("c"), true);
  EXPECT_EQ(ReadData(), Data({"a", "b", "c"}));
}

TEST_F(TraceBufferTest, ShorterOrGarbledRecommitIsRejected) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("one").AddFragment("two").AddFragment("x"), false);
  Commit(1, ChunkBuilder(0, 1).AddFragment("one"), true);                     // Shorter.
  Commit(1, ChunkBuilder(0, 1).AddFragment("ONE").AddFragment("two"), true);  // Garbled.
  EXPECT_EQ(buf_->stats().abi_violations, 2u);
  EXPECT_EQ(ReadData(), Data({"one", "two"}));
}

TEST_F(TraceBufferTest, CompleteChunkCommittedTwiceIsReadOnce) {
  CreateBuffer(4096);
  ChunkBuilder b(0, 1);
  b.AddFragment("a").AddFragment("b");
  Commit(1, b);
  Commit(1, b);
  EXPECT_EQ(buf_->stats().chunks_rewritten, 1u);
  buf_->BeginRead();
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss;
  ASSERT_TRUE(buf_->ReadNextTracePacket(&packet, &props, &loss));
  EXPECT_EQ(packet.ToString(), "a");
  Commit(1, b);  // Again, after a partial read.
  EXPECT_EQ(ReadData(), Data({"b"}));
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
}

TEST_F(TraceBufferTest, RecommitOfAChunkAlreadyConsumedIsRejected) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  ReadAll();
  Commit(1, ChunkBuilder(0, 1).AddFragment("a"));
  EXPECT_TRUE(ReadAll().empty());
  EXPECT_EQ(buf_->stats().abi_violations, 1u);
}

TEST_F(TraceBufferTest, ScrapedChunkThatOutgrowsItsReservationIsRelocated) {
  CreateBuffer(4096);
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b"), false);
  EXPECT_EQ(ReadData(), Data({"a"}));
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("bbbbbbbbbb").AddFragment("c"), true);
  EXPECT_EQ(buf_->stats().chunks_relocated, 1u);
  EXPECT_EQ(ReadData(), Data({"bbbbbbbbbb", "c"}));
}

TEST_F(TraceBufferTest, LateFinalCommitAfterReadAndEvictionDeliversTheRestWithoutLoss) {
  CreateBuffer(4096);
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("one").AddFragment("tw").PadTo(2000);  // Reserves 2020 bytes at 0.
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), Data({"one"}));
  Commit(2, ChunkOfOuterSize(0, 1, 1500, 'x'));
  Commit(2, ChunkOfOuterSize(1, 1, 1000, 'y'));  // Wraps over the scraped chunk.
  // All it held that could be read was read: nothing is lost (yet).
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
  EXPECT_EQ(buf_->stats().bytes_overwritten, 0u);
  ChunkBuilder final_chunk(0, 1);
  final_chunk.AddFragment("one").AddFragment("two");
  Commit(1, final_chunk, true);
  EXPECT_EQ(buf_->stats().chunks_relocated, 1u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].data[0], 'x');
  EXPECT_EQ(r[1].data[0], 'y');
  // "one" was read before the eviction: only the rest comes back.
  EXPECT_EQ(r[2].data, "two");
  EXPECT_EQ(r[2].loss, 0u);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
  EXPECT_EQ(buf_->stats().bytes_overwritten, 0u);
  EXPECT_EQ(buf_->stats().data_loss_overwrite, 0u);
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
}

TEST_F(TraceBufferTest, ReScrapeAfterReadAndEvictionIsReadmittedWithOnlyTheNewPackets) {
  CreateBuffer(4096);
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("one").AddFragment("tw").PadTo(2000);
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), Data({"one"}));
  Commit(2, ChunkOfOuterSize(0, 1, 1500, 'x'));
  Commit(2, ChunkOfOuterSize(1, 1, 1000, 'y'));  // Wraps over the scraped chunk.
  EXPECT_EQ(ReadAll().size(), 2u);
  // The writer wrote on: a second scrape, still incomplete.
  ChunkBuilder rescraped(0, 1);
  rescraped.AddFragment("one").AddFragment("two").AddFragment("thr").PadTo(2000);
  Commit(1, rescraped, false);
  EXPECT_EQ(buf_->stats().abi_violations, 0u);
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "two");
  EXPECT_EQ(r[0].loss, 0u);
  // Its final commit completes it in place.
  Commit(1, ChunkBuilder(0, 1).AddFragment("one").AddFragment("two").AddFragment("three"));
  std::vector<ReadPacket> rest = ReadAll();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].data, "three");
  EXPECT_EQ(rest[0].loss, 0u);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
}

TEST_F(TraceBufferTest, EvictedScrapedChunkNeverCommittedAgainIsALossOnTheNextChunk) {
  CreateBuffer(4096);
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("one").AddFragment("tw").PadTo(2000);
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), Data({"one"}));
  Commit(2, ChunkOfOuterSize(0, 1, 1500, 'x'));
  Commit(2, ChunkOfOuterSize(1, 1, 1000, 'y'));  // Wraps over the scraped chunk.
  // The sequence moves on without chunk 0's final commit: "tw..." is gone.
  Commit(1, ChunkBuilder(1, 1).AddFragment("next"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].data, "next");
  EXPECT_EQ(r[2].loss, kDataLossPresent | kDataLossOverwrite);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 1u);
  EXPECT_EQ(buf_->stats().bytes_overwritten, 2020u);
  EXPECT_EQ(buf_->stats().data_loss_overwrite, 1u);
}

TEST_F(TraceBufferTest, FinalCommitOfAScrapedChunkTheRingReachedIsRelocatedNotOverwritten) {
  CreateBuffer(4096);
  Commit(2, ChunkOfOuterSize(0, 1, 1000, 'p'));  // [0, 1000)
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("a").AddFragment("b").PadTo(1000);  // [1000, 2020)
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), (std::vector<std::string>{std::string(976, 'p'), "a"}));
  Commit(2, ChunkOfOuterSize(1, 1, 1000, 'x'));  // [2020, 3020)
  Commit(2, ChunkOfOuterSize(2, 1, 1000, 'y'));  // [3020, 4020)
  Commit(2, ChunkOfOuterSize(3, 1, 1000, 'z'));  // Wraps to [0, 1000): next is the scraped one.
  // The final commit, whose last packet goes on in chunk 1.
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b").AddFragment("c1").set_flags(
                kLastPacketContinuesOnNextChunk));
  Commit(1, ChunkBuilder(1, 1).AddFragment("c2").AddFragment("d").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  EXPECT_EQ(buf_->stats().chunks_relocated, 1u);
  EXPECT_EQ(buf_->stats().chunks_rewritten, 0u);
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
  std::vector<ReadPacket> r = ReadAll();
  std::vector<std::string> data;
  for (const ReadPacket& p : r) {
    data.push_back(p.data.size() > 10 ? p.data.substr(0, 1) : p.data);
    EXPECT_EQ(p.loss, 0u) << p.data;
  }
  EXPECT_EQ(data, Data({"x", "y", "z", "b", "c1c2", "d"}));
}

TEST_F(TraceBufferTest, RelocatedFinalCommitComesOutAfterDataWrittenBeforeIt) {
  CreateBuffer(4096);
  ChunkBuilder scraped(0, 1);
  scraped.AddFragment("a").AddFragment("b").PadTo(1000);  // [0, 1020)
  Commit(1, scraped, false);
  EXPECT_EQ(ReadData(), Data({"a"}));
  Commit(2, ChunkOfOuterSize(0, 1, 1000, 'x'));  // [1020, 2020)
  Commit(2, ChunkOfOuterSize(1, 1, 1000, 'y'));  // [2020, 3020)
  Commit(2, ChunkOfOuterSize(2, 1, 1060, 'z'));  // [3020, 4080): the buffer is full.
  // Its final commit does not fit before the end: the ring wraps onto it.
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment("b").AddFragment("c"));
  EXPECT_EQ(buf_->stats().chunks_relocated, 1u);
  EXPECT_EQ(buf_->stats().chunks_rewritten, 0u);
  std::vector<ReadPacket> r = ReadAll();
  std::vector<std::string> data;
  for (const ReadPacket& p : r) {
    data.push_back(p.data.substr(0, 1));
    EXPECT_EQ(p.loss, 0u) << p.data;
  }
  EXPECT_EQ(data, Data({"x", "y", "z", "b", "c"}));
  EXPECT_EQ(buf_->stats().chunks_overwritten, 0u);
}

// --- Overwrite observer ------------------------------------------------------

TEST_F(TraceBufferTest, OverwriteObserverGetsPacketsInSequenceOrderBeforeTheyAreGone) {
  CreateBuffer(4096);
  std::vector<std::string> observed;
  buf_->SetOverwriteObserver([&](const PacketSequenceProperties& props, const TracePacket& p) {
    EXPECT_EQ(props.producer_id_trusted, 1);
    observed.push_back(p.ToString());
  });
  Commit(1, ChunkBuilder(0, 1).AddFragment("a").AddFragment(std::string(1500, 'b')));  // [0, 1532)
  Commit(1, ChunkBuilder(2, 1).AddFragment(std::string(1000, 'd')));  // [1532, 2556)
  Commit(1, ChunkBuilder(1, 1).AddFragment(std::string(1000, 'c')));  // [2556, 3580), out of order
  Commit(2, ChunkOfOuterSize(0, 1, 1500, 'z'));  // Wraps: deletes seq 1's chunk 0.
  ASSERT_EQ(observed.size(), 2u);
  EXPECT_EQ(observed[0], "a");
  EXPECT_EQ(observed[1], std::string(1500, 'b'));
  Commit(2, ChunkOfOuterSize(1, 1, 1500, 'y'));  // Deletes chunk 2, so chunk 1 goes first.
  ASSERT_EQ(observed.size(), 4u);
  EXPECT_EQ(observed[2], std::string(1000, 'c'));
  EXPECT_EQ(observed[3], std::string(1000, 'd'));
  EXPECT_EQ(buf_->stats().chunks_overwritten, 3u);
}

// --- Sequence state sweeping -------------------------------------------------

TEST_F(TraceBufferTest, EmptySequencesAreSweptKeepingTheLast1024) {
  CreateBuffer(1 << 20);
  for (WriterID w = 0; w < 3000; w++) {
    Commit(1, ChunkBuilder(0, w).AddFragment("x"));
    ReadAll();
  }
  EXPECT_LE(buf_->sequence_count_for_testing(), TraceBuffer::kKeepLastEmptySeq + 1);
  // A recently emptied sequence still detects its gap.
  Commit(1, ChunkBuilder(2, 2999).AddFragment("y"));
  std::vector<ReadPacket> r = ReadAll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].loss, kDataLossPresent | kDataLossReadGap);
  // ...and its next contiguous chunk reads without a loss.
  Commit(1, ChunkBuilder(3, 2999).AddFragment("z"));
  EXPECT_EQ(ReadAll()[0].loss, 0u);
}

TEST_F(TraceBufferTest, BusySequenceDoesNotPushIdleOnesOutOfTheSweepWindow) {
  CreateBuffer(1 << 20);
  Commit(1, ChunkBuilder(0, 500).AddFragment("idle"));
  ReadAll();
  // One writer empties its sequence thousands of times.
  for (ChunkID id = 0; id < 5000; id++) {
    Commit(2, ChunkBuilder(id, 1).AddFragment("busy"));
    ReadAll();
  }
  Commit(1, ChunkBuilder(1, 500).AddFragment("back"));
  EXPECT_EQ(ReadAll()[0].loss, 0u);  // Its state survived: no false gap.
}

// --- Cloning -----------------------------------------------------------------

TEST_F(TraceBufferTest, CloneReadsExactlyWhatTheOriginalWouldHaveRead) {
  CreateBuffer(4096);
  for (ChunkID id = 0; id < 7; id++) Commit(1, ChunkOfOuterSize(id, 1, 900, 'a' + id));
  Commit(2, ChunkBuilder(0, 1).AddFragment("b0").set_flags(kLastPacketContinuesOnNextChunk));
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly();
  ASSERT_NE(clone, nullptr);
  EXPECT_TRUE(clone->read_only());
  // The original keeps accepting writes after the clone.
  Commit(2, ChunkBuilder(1, 1).AddFragment("b1").set_flags(kFirstPacketContinuesFromPrevChunk));
  std::vector<ReadPacket> from_clone = ReadAllFrom(clone.get());
  std::vector<ReadPacket> from_original = ReadAll();
  ASSERT_EQ(from_clone.size(), 3u);
  ASSERT_EQ(from_original.size(), 4u);
  for (size_t i = 0; i < from_clone.size(); i++) {
    EXPECT_EQ(from_clone[i].data, from_original[i].data);
    EXPECT_EQ(from_clone[i].loss, from_original[i].loss);
  }
  EXPECT_EQ(from_original[3].data, "b0b1");
  EXPECT_EQ(clone->stats().chunks_written, 8u);
}

TEST_F(TraceBufferTest, CloneRefusesWrites) {
  CreateBuffer(4096);
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly();
  clone->CopyChunkUntrusted(1, ClientIdentity{}, 1, 0, 0, 0, true, nullptr, 0);
  EXPECT_EQ(clone->stats().chunks_written, 0u);
  TraceBuffer::Patch patch;
  EXPECT_FALSE(clone->TryPatchChunkContents(1, 1, 0, &patch, 1, false));
}

// The packets of chunks `first`..`last` (ChunkOfOuterSize fills), in order.
std::vector<std::string> Fills(ChunkID first, ChunkID last, uint32_t outer) {
  std::vector<std::string> out;
  for (ChunkID id = first; id <= last; id++) {
    out.push_back(std::string(outer - kTBChunkHeader - kFragmentHeaderSize, 'a' + id % 26));
  }
  return out;
}

std::vector<std::string> DataOf(const std::vector<ReadPacket>& packets) {
  std::vector<std::string> data;
  for (const ReadPacket& p : packets) data.push_back(p.data);
  return data;
}

TEST_F(TraceBufferTest, ACopyOnWriteCloneKeepsWhatTheWritersOverwriteWhileItIsInProgress) {
  CreateBuffer(16 * 1024);
  buf_->SetCloneBlockSizeForTesting(1024);
  for (ChunkID id = 0; id < 16; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
  ASSERT_NE(clone, nullptr);
  EXPECT_TRUE(buf_->clone_in_progress());
  EXPECT_FALSE(clone->clone_complete());
  EXPECT_TRUE(ReadAllFrom(clone.get()).empty());  // Reads as empty until complete.
  // Two laps of the ring: every byte the clone had is overwritten, the first
  // ones before any step of the clone ran.
  for (ChunkID id = 16; id < 48; id++) {
    Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
    if (id % 4 == 0) buf_->ContinueClone(1024);
  }
  EXPECT_TRUE(buf_->ContinueClone(1));
  EXPECT_TRUE(clone->clone_complete());
  EXPECT_EQ(DataOf(ReadAllFrom(clone.get())), Fills(0, 15, 1024));
  EXPECT_EQ(clone->stats().chunks_written, 16u);
  EXPECT_EQ(DataOf(ReadAll()), Fills(32, 47, 1024));
}

TEST_F(TraceBufferTest, ACopyOnWriteCloneKeepsTheReadPositionOfItsMoment) {
  CreateBuffer(16 * 1024);
  buf_->SetCloneBlockSizeForTesting(1024);
  for (ChunkID id = 0; id < 8; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  ASSERT_EQ(ReadAll().size(), 8u);
  for (ChunkID id = 8; id < 12; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
  // The original reads on (marking bytes consumed in its chunk headers).
  EXPECT_EQ(DataOf(ReadAll()), Fills(8, 11, 1024));
  buf_->ContinueClone(SIZE_MAX);
  EXPECT_EQ(DataOf(ReadAllFrom(clone.get())), Fills(8, 11, 1024));
}

using CloneScope = TraceBuffer::CloneScope;

TEST_F(TraceBufferTest, AnEverythingCloneReadsWhatADrainAlreadyReadAsIfNeverRead) {
  CreateBuffer(16 * 1024);
  for (ChunkID id = 0; id < 8; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  Commit(2, ChunkOfOuterSize(0, 1, 1024, 'z'));
  ASSERT_EQ(ReadAll().size(), 9u);
  for (ChunkID id = 8; id < 12; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  const TraceBuffer::Stats before = buf_->stats();

  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly(CloneScope::kEverything);
  ASSERT_NE(clone, nullptr);
  std::vector<ReadPacket> all = ReadAllFrom(clone.get());
  std::vector<std::string> of_1;
  for (const ReadPacket& p : all) {
    EXPECT_EQ(p.loss, 0u) << p.data.substr(0, 1);
    if (p.producer == 1) of_1.push_back(p.data);
  }
  EXPECT_EQ(of_1, Fills(0, 11, 1024));
  EXPECT_EQ(all.size(), 13u);  // Producer 2's chunk too.
  // A second pass of the clone has nothing new; the original is untouched.
  EXPECT_TRUE(ReadAllFrom(clone.get()).empty());
  EXPECT_EQ(buf_->stats().bytes_read, before.bytes_read);
  EXPECT_EQ(DataOf(ReadAll()), Fills(8, 11, 1024));
}

TEST_F(TraceBufferTest, AnEverythingCloneHasWhatTheRingKeptAndFlagsUnreadOverwrites) {
  CreateBuffer(16 * 1024);
  for (ChunkID id = 0; id < 16; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  ASSERT_EQ(ReadAll().size(), 16u);
  // A lap over read data: no loss.
  for (ChunkID id = 16; id < 32; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  {
    std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly(CloneScope::kEverything);
    std::vector<ReadPacket> all = ReadAllFrom(clone.get());
    EXPECT_EQ(DataOf(all), Fills(16, 31, 1024));
    for (const ReadPacket& p : all) EXPECT_EQ(p.loss, 0u);
  }
  ASSERT_EQ(ReadAll().size(), 16u);
  // Half a lap over read data, then four chunks over unread ones: lost.
  for (ChunkID id = 32; id < 52; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly(CloneScope::kEverything);
  std::vector<ReadPacket> all = ReadAllFrom(clone.get());
  EXPECT_EQ(DataOf(all), Fills(36, 51, 1024));
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(all[0].loss & kDataLossOverwrite);
  for (size_t i = 1; i < all.size(); i++) EXPECT_EQ(all[i].loss, 0u);
}

TEST_F(TraceBufferTest, AnEverythingCloneRereadsAPartlyReadChunkAndAPacketSpanningChunks) {
  CreateBuffer(16 * 1024);
  Commit(1, ChunkBuilder(0, 1).AddFragment("p0").AddFragment("p1").AddFragment("q").set_flags(
                kLastPacketContinuesOnNextChunk));
  EXPECT_EQ(ReadData(), (std::vector<std::string>{"p0", "p1"}));  // "q" waits for its end.
  Commit(1, ChunkBuilder(1, 1).AddFragment("r").AddFragment("s").set_flags(
                kFirstPacketContinuesFromPrevChunk));
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly(CloneScope::kEverything);
  EXPECT_EQ(DataOf(ReadAllFrom(clone.get())), (std::vector<std::string>{"p0", "p1", "qr", "s"}));
  EXPECT_EQ(ReadData(), (std::vector<std::string>{"qr", "s"}));
}

TEST_F(TraceBufferTest, AnEverythingCloneDoesNotRepeatARelocatedChunk) {
  CreateBuffer(8 * 1024);
  // A scraped chunk, partly read, then finally committed once the ring has
  // come round to it: stored anew, its old copy retired.
  ChunkBuilder scraped = ChunkOfOuterSize(0, 1, 1024, 'a');
  scraped.AddFragment("tail");
  Commit(1, scraped, /*complete=*/false);
  EXPECT_EQ(ReadAll().size(), 1u);
  for (ChunkID id = 0; id < 6; id++) Commit(2, ChunkOfOuterSize(id, 1, 1024, 'k'));
  Commit(1, scraped, /*complete=*/true);
  ASSERT_EQ(buf_->stats().chunks_relocated, 1u);
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly(CloneScope::kEverything);
  std::vector<std::string> of_1;
  for (const ReadPacket& p : ReadAllFrom(clone.get())) {
    if (p.producer == 1) of_1.push_back(p.data);
  }
  EXPECT_EQ(of_1, (std::vector<std::string>{Fills(0, 0, 1024)[0], "tail"}));
}

TEST_F(TraceBufferTest, ACloneCopiedOnAnotherThreadWhileTheOwnerWritesReadsAsTheBufferWas) {
  for (int round = 0; round < 40; round++) {
    CreateBuffer(256 * 1024);
    buf_->SetCloneBlockSizeForTesting(4096);
    ChunkID id = 0;
    for (; id < 300; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
    // The same moment, copied at once under the (notional) lock.
    const std::vector<std::string> expected = DataOf(ReadAllFrom(buf_->CloneReadOnly().get()));
    std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
    ASSERT_NE(clone, nullptr);
    std::unique_ptr<TraceBuffer::CloneCopier> copier = buf_->clone_copier();
    ASSERT_NE(copier, nullptr);
    std::thread copying([&copier, round] {
      // Small steps, and a late start on some rounds: the owner gets ahead.
      if (round % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      while (!copier->CopySome(4096)) {
      }
    });
    // Two laps over everything the clone holds while it is being copied.
    for (const ChunkID end = id + 512; id < end; id++) {
      Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
    }
    copying.join();
    EXPECT_TRUE(buf_->ContinueClone(1));
    EXPECT_FALSE(buf_->clone_in_progress());
    ASSERT_TRUE(clone->clone_complete());
    ASSERT_EQ(DataOf(ReadAllFrom(clone.get())), expected) << "round " << round;
  }
}

TEST_F(TraceBufferTest, OneCloneInProgressAtATime) {
  CreateBuffer(4096);
  buf_->SetCloneBlockSizeForTesting(1024);
  Commit(1, ChunkOfOuterSize(0, 1, 2048, 'a'));
  std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
  ASSERT_NE(clone, nullptr);
  EXPECT_EQ(buf_->BeginClone(), nullptr);
  EXPECT_EQ(buf_->CloneReadOnly(), nullptr);
  buf_->ContinueClone(SIZE_MAX);
  EXPECT_NE(buf_->BeginClone(), nullptr);
}

TEST_F(TraceBufferTest, ACloneOutlivingItsOriginalIsCompletedByTheOriginalsEnd) {
  CreateBuffer(16 * 1024);
  buf_->SetCloneBlockSizeForTesting(1024);
  for (ChunkID id = 0; id < 10; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
  buf_.reset();
  ASSERT_TRUE(clone->clone_complete());
  EXPECT_EQ(DataOf(ReadAllFrom(clone.get())), Fills(0, 9, 1024));
}

TEST_F(TraceBufferTest, ACloneDroppedWhileInProgressStopsTheCopy) {
  CreateBuffer(16 * 1024);
  buf_->SetCloneBlockSizeForTesting(1024);
  for (ChunkID id = 0; id < 10; id++) Commit(1, ChunkOfOuterSize(id, 1, 1024, 'a' + id % 26));
  buf_->BeginClone().reset();
  EXPECT_TRUE(buf_->clone_in_progress());
  Commit(1, ChunkOfOuterSize(10, 1, 1024, 'k'));  // The first write notices.
  EXPECT_FALSE(buf_->clone_in_progress());
  EXPECT_EQ(DataOf(ReadAll()), Fills(0, 10, 1024));
}

TEST_F(TraceBufferTest, ACloneOfAnEmptyBufferIsCompleteAtOnce) {
  CreateBuffer(4096);
  std::unique_ptr<TraceBuffer> clone = buf_->BeginClone();
  ASSERT_NE(clone, nullptr);
  EXPECT_TRUE(clone->clone_complete());
  EXPECT_FALSE(buf_->clone_in_progress());
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// What one fault in an anonymous mapping may commit: a transparent huge page
// when the kernel gives them to every mapping (2 MiB on x86-64; 32 MiB on
// an arm64 kernel of 16 KiB pages, whose Debian build has THP "always"),
// else nothing beyond the page.
size_t HugePageBytes() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(enabled)), std::istreambuf_iterator<char>());
  if (modes.find("[always]") == std::string::npos) return 0;
  std::ifstream size("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  size_t bytes = 0;
  size >> bytes;
  return bytes;
}

// The /proc/self/smaps line `key` of the mapping holding `addr`, "" if none.
std::string SmapsFieldOf(const void* addr, const std::string& key) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 && line.find(':') > 8) {
      inside = a >= start && a < end;
    } else if (inside && line.rfind(key + ":", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST_F(TraceBufferTest, APopulatedBufferAsksForHugePages) {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(enabled)), std::istreambuf_iterator<char>());
  std::ifstream pmd("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  size_t pmd_bytes = 0;
  pmd >> pmd_bytes;
  if (modes.empty() || modes.find("[never]") != std::string::npos || pmd_bytes != (2u << 20)) {
    GTEST_SKIP() << "no transparent huge pages of 2 MiB on this kernel";
  }
  CreateBuffer(8 << 20);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(buf_->memory_for_testing()) % (2u << 20), 0u);
  ASSERT_TRUE(buf_->Populate());
  // Eligible: the kernel may give the range huge pages (whether it had one
  // free to give is the machine's state, not the buffer's).
  const std::string line = SmapsFieldOf(buf_->memory_for_testing(), "THPeligible");
  ASSERT_FALSE(line.empty()) << "no THPeligible line in /proc/self/smaps for the buffer";
  EXPECT_EQ(line.back(), '1') << line;
}

TEST_F(TraceBufferTest, MemoryIsCommittedLazilyForTheBufferAndItsClone) {
  const size_t before = ResidentBytes();
  CreateBuffer(size_t{1} << 30);
  for (ChunkID id = 0; id < 256; id++) Commit(1, ChunkOfOuterSize(id, 1, 4096, 'm'));
  std::unique_ptr<TraceBuffer> clone = buf_->CloneReadOnly();
  const size_t after = ResidentBytes();
  // 1 MiB written, so about 2 MiB resident for both (a huge page each at
  // most), nowhere near 2 GiB.
  EXPECT_LT(after - std::min(after, before), (size_t{16} << 20) + 2 * HugePageBytes());
  EXPECT_EQ(clone->used_size(), size_t{1} << 20);
}

}  // namespace
}  // namespace ringside::buffer
