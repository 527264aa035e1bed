#include "agent/writer/producer_buffer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/writer/trace_writer.h"
#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

// A packet read back with the sequence the buffer filed it under.
struct Read {
  std::string bytes;
  buffer::PacketSequenceProperties props;
  uint32_t loss = 0;
};

std::vector<Read> ReadAll(buffer::TraceBuffer* tb) {
  std::vector<Read> out;
  tb->BeginRead();
  buffer::TracePacket packet;
  Read r;
  while (tb->ReadNextTracePacket(&packet, &r.props, &r.loss)) {
    r.bytes = packet.ToString();
    out.push_back(r);
  }
  return out;
}

ProducerBuffer::Options Pool(size_t num_chunks,
                             PoolExhaustedPolicy policy = PoolExhaustedPolicy::kDrop) {
  ProducerBuffer::Options o;
  o.num_chunks = num_chunks;
  o.policy = policy;
  return o;
}

void WriteTimestampPacket(TraceWriter* writer, uint64_t ts) {
  auto packet = writer->NewTracePacket();
  packet->AppendVarInt(TracePacket::kTimestampFieldNumber, ts);
}

uint64_t TimestampOf(const Read& r) {
  TracePacket p;
  EXPECT_TRUE(p.ParseFromString(r.bytes));
  return p.timestamp();
}

// Copies a hand-built chunk into a pool chunk and commits it as `writer_id`.
void CommitBuiltChunk(ProducerBuffer* producer, buffer::WriterID writer_id,
                      const buffer::ChunkBuilder& builder) {
  uint8_t* chunk = producer->AcquireChunk();
  ASSERT_NE(chunk, nullptr);
  const std::vector<uint8_t> bytes = builder.Build();
  ASSERT_LE(bytes.size(), producer->chunk_size());
  std::memcpy(chunk, bytes.data(), bytes.size());
  CommitEntry entry;
  entry.kind = CommitEntry::Kind::kChunk;
  entry.writer_id = writer_id;
  entry.chunk = chunk;
  producer->Enqueue(std::move(entry));
}

TEST(ProducerBufferTest, PoolHandsOutNumChunksDisjointChunksOfChunkSize) {
  ProducerBuffer::Options o = Pool(5);
  o.chunk_size = 8192;
  ProducerBuffer producer(1, {}, o);
  std::vector<uint8_t*> chunks;
  for (int i = 0; i < 5; i++) {
    uint8_t* c = producer.AcquireChunk();
    ASSERT_NE(c, nullptr);
    chunks.push_back(c);
  }
  std::sort(chunks.begin(), chunks.end());
  for (size_t i = 1; i < chunks.size(); i++) {
    EXPECT_GE(chunks[i] - chunks[i - 1], 8192) << "chunks " << i - 1 << " and " << i << " overlap";
  }
  // Every byte of every chunk is writable memory of the pool.
  for (uint8_t* c : chunks) std::memset(c, 0xab, 8192);
}

TEST(ProducerBufferTest, ExhaustedPoolUnderDropReturnsNullAndCountsEachAttempt) {
  ProducerBuffer producer(1, {}, Pool(2));
  ASSERT_NE(producer.AcquireChunk(), nullptr);
  ASSERT_NE(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  const ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.pool_exhausted, 2u);
  EXPECT_EQ(s.stalls, 0u);
  EXPECT_EQ(s.stall_ns, 0u);
}

TEST(ProducerBufferTest, DrainReturnsCommittedChunksToThePool) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(1));
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  producer.CommitQueuedInto(tb.get());
  EXPECT_NE(producer.AcquireChunk(), nullptr);
}

TEST(ProducerBufferTest, DrainReturnsTheNumberOfEntriesApplied) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(4));
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  CommitBuiltChunk(&producer, 2, buffer::ChunkBuilder(0, 2).AddFragment("b"));
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 2u);
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 0u);
}

TEST(ProducerBufferTest, CommittedPacketsCarryTheProducersIdAndIdentity) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(42, buffer::ClientIdentity{1000, 4321}, Pool(4));
  auto writer = producer.CreateTraceWriter(7);
  WriteTimestampPacket(writer.get(), 5);
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(TimestampOf(reads[0]), 5u);
  EXPECT_EQ(reads[0].props.producer_id_trusted, 42);
  EXPECT_EQ(reads[0].props.client_identity_trusted.uid, 1000u);
  EXPECT_EQ(reads[0].props.client_identity_trusted.pid, 4321);
  EXPECT_EQ(reads[0].props.writer_id, 7);
}

TEST(ProducerBufferTest, SequenceIsTheCommittingWritersNotTheOneInTheChunkHeader) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(4));
  // The chunk claims writer 9; writer 2 committed it.
  CommitBuiltChunk(&producer, 2, buffer::ChunkBuilder(0, 9).AddFragment("claimed"));
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].bytes, "claimed");
  EXPECT_EQ(reads[0].props.writer_id, 2);
}

TEST(ProducerBufferTest, PatchEntriesReachTheirChunkInTheBuffer) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(4));
  CommitBuiltChunk(
      &producer, 3,
      buffer::ChunkBuilder(0, 3).AddFragment("XXXX-body").set_flags(buffer::kChunkNeedsPatching));
  CommitEntry patches;
  patches.kind = CommitEntry::Kind::kPatches;
  patches.writer_id = 3;
  patches.chunk_id = 0;
  // Offset 4: just past the fragment's 4-byte size header.
  patches.patches.push_back(buffer::TraceBuffer::Patch{4, {'D', 'O', 'N', 'E'}});
  producer.Enqueue(std::move(patches));
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].bytes, "DONE-body");
  EXPECT_EQ(tb->stats().patches_succeeded, 1u);
}

TEST(ProducerBufferTest, StatsCountCommitsScrapesAndPatchesApart) {
  ProducerBuffer producer(1, {}, Pool(4));
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  CommitEntry scraped;
  scraped.kind = CommitEntry::Kind::kScrapedChunk;
  producer.Enqueue(std::move(scraped));
  CommitEntry patches;
  patches.kind = CommitEntry::Kind::kPatches;
  patches.patches.resize(3);
  producer.Enqueue(std::move(patches));
  const ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.chunks_committed, 1u);
  EXPECT_EQ(s.chunks_scraped, 1u);
  EXPECT_EQ(s.patches_committed, 3u);
}

TEST(ProducerBufferTest, ScrapeCommitsTheCompletePacketsOfEveryWriter) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(8));
  auto a = producer.CreateTraceWriter(1);
  auto b = producer.CreateTraceWriter(2);
  WriteTimestampPacket(a.get(), 10);
  WriteTimestampPacket(b.get(), 20);
  WriteTimestampPacket(b.get(), 21);
  // Nothing is committed until a chunk fills or a writer flushes; a scrape
  // does not wait for either.
  producer.CommitQueuedInto(tb.get());
  ASSERT_TRUE(ReadAll(tb.get()).empty());
  producer.ScrapeWriters();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  std::multiset<uint64_t> timestamps;
  for (const Read& r : reads) timestamps.insert(TimestampOf(r));
  EXPECT_EQ(timestamps, (std::multiset<uint64_t>{10, 20, 21}));
  EXPECT_EQ(producer.stats().chunks_scraped, 2u);
  EXPECT_EQ(producer.stats().chunks_committed, 0u);
}

TEST(ProducerBufferTest, ScrapeSkipsWritersWithNoCompletePacket) {
  ProducerBuffer producer(1, {}, Pool(8));
  auto idle = producer.CreateTraceWriter(1);
  auto busy = producer.CreateTraceWriter(2);
  auto open = busy->NewTracePacket();
  open->AppendVarInt(TracePacket::kTimestampFieldNumber, 1);
  producer.ScrapeWriters();
  EXPECT_EQ(producer.stats().chunks_scraped, 0u);
}

TEST(ProducerBufferTest, DestroyedWriterFlushesAndIsNoLongerScraped) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(8));
  auto kept = producer.CreateTraceWriter(1);
  WriteTimestampPacket(kept.get(), 1);
  {
    auto gone = producer.CreateTraceWriter(2);
    WriteTimestampPacket(gone.get(), 2);
  }
  EXPECT_EQ(producer.stats().chunks_committed, 1u);
  producer.ScrapeWriters();
  EXPECT_EQ(producer.stats().chunks_scraped, 1u);
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 2u);
}

TEST(ProducerBufferTest, StallWaitsForAChunkTheOwnerFrees) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer::Options o = Pool(1, PoolExhaustedPolicy::kStall);
  o.stall_timeout = absl::Seconds(30);
  ProducerBuffer producer(1, {}, o);
  producer.AttachCommitter([] {});
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  std::thread owner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    producer.CommitQueuedInto(tb.get());
  });
  EXPECT_NE(producer.AcquireChunk(), nullptr);
  owner.join();
  const ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.pool_exhausted, 1u);
  EXPECT_EQ(s.stalls, 1u);
  EXPECT_EQ(s.stall_timeouts, 0u);
  EXPECT_GT(s.stall_ns, 0u);
}

TEST(ProducerBufferTest, StallGivesUpAfterTheTimeoutAndCountsIt) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer::Options o = Pool(1, PoolExhaustedPolicy::kStall);
  o.stall_timeout = absl::Milliseconds(10);
  ProducerBuffer producer(1, {}, o);
  producer.AttachCommitter([] {});
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.pool_exhausted, 1u);
  EXPECT_EQ(s.stalls, 1u);
  EXPECT_EQ(s.stall_timeouts, 1u);
  EXPECT_GE(s.stall_ns, 10'000'000u);
  EXPECT_EQ(s.chunks_dropped(), 1u);
  // The owner is stuck: the next acquisitions drop at once, without a wait
  // each, until a chunk comes back.
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  s = producer.stats();
  EXPECT_EQ(s.stalls, 1u);
  EXPECT_EQ(s.chunks_dropped(), 3u);
  producer.CommitQueuedInto(tb.get());
  EXPECT_NE(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  s = producer.stats();
  EXPECT_EQ(s.stalls, 2u) << "a freed chunk makes writers wait again";
  EXPECT_EQ(s.stall_timeouts, 2u);
}

TEST(ProducerBufferTest, StallWithNobodyToCommitDropsAtOnce) {
  ProducerBuffer::Options o = Pool(1, PoolExhaustedPolicy::kStall);
  o.stall_timeout = absl::Seconds(30);
  ProducerBuffer producer(1, {}, o);
  ASSERT_NE(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  const ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.stalls, 0u);
  EXPECT_EQ(s.chunks_dropped(), 1u);
}

TEST(ProducerBufferTest, DetachingTheCommitterEndsAStall) {
  ProducerBuffer::Options o = Pool(1, PoolExhaustedPolicy::kStall);
  o.stall_timeout = absl::Seconds(30);
  ProducerBuffer producer(1, {}, o);
  producer.AttachCommitter([] {});
  ASSERT_NE(producer.AcquireChunk(), nullptr);
  std::thread owner([&] {
    // Once the writer waits.
    while (producer.stats().stalls == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    producer.DetachCommitter();
  });
  const absl::Time start = absl::Now();
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  owner.join();
  EXPECT_EQ(producer.stats().chunks_dropped(), 1u);
}

TEST(ProducerBufferTest, AskForACommitOnceWhenAsManyChunksWaitAsAreFree) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, Pool(8));
  int requests = 0;
  producer.AttachCommitter([&] { requests++; });
  // The fifth acquisition finds four chunks waiting and four free.
  for (uint32_t i = 0; i < 4; i++) {
    CommitBuiltChunk(&producer, i, buffer::ChunkBuilder(0, i).AddFragment("a"));
  }
  EXPECT_EQ(requests, 0);
  CommitBuiltChunk(&producer, 4, buffer::ChunkBuilder(0, 4).AddFragment("b"));
  EXPECT_EQ(requests, 1);
  // Not again until the owner has committed.
  CommitBuiltChunk(&producer, 5, buffer::ChunkBuilder(0, 5).AddFragment("c"));
  EXPECT_EQ(requests, 1);
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 6u);
  CommitBuiltChunk(&producer, 6, buffer::ChunkBuilder(0, 6).AddFragment("d"));
  EXPECT_EQ(requests, 1) << "the pool is back to 7 of 8 chunks free";
  for (uint32_t i = 7; i < 11; i++) {
    CommitBuiltChunk(&producer, i, buffer::ChunkBuilder(0, i).AddFragment("e"));
  }
  EXPECT_EQ(requests, 2);
}

// A machine with many CPUs has as many writers, each holding a chunk open:
// those are no reason to wake the owner, only chunks waiting for it are.
TEST(ProducerBufferTest, ChunksWritersHoldOpenAskForNoCommit) {
  ProducerBuffer producer(1, {}, Pool(8));
  int requests = 0;
  producer.AttachCommitter([&] { requests++; });
  for (int i = 0; i < 7; i++) ASSERT_NE(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(requests, 0);
  CommitBuiltChunk(&producer, 1, buffer::ChunkBuilder(0, 1).AddFragment("a"));
  EXPECT_EQ(requests, 0);
  EXPECT_EQ(producer.AcquireChunk(), nullptr);
  EXPECT_EQ(requests, 1) << "one chunk waits, none is free";
}

// The reader of a kernel source, writing a burst eight times its pool with
// an owner thread that commits only when asked: every packet arrives, and
// no writer waits out its stall timeout.
TEST(ProducerBufferTest, AWriterFasterThanTheOwnersPeriodLosesNothingWithCommitRequests) {
  auto tb = buffer::TraceBuffer::Create(16 << 20);
  ProducerBuffer::Options o = Pool(16, PoolExhaustedPolicy::kStall);
  // Long enough for a loaded machine, short enough to fail rather than hang
  // when requests are not made.
  o.stall_timeout = absl::Seconds(2);
  ProducerBuffer producer(1, {}, o);
  absl::Mutex mu;
  bool requested = false, done = false;
  producer.AttachCommitter([&] {
    absl::MutexLock lock(&mu);
    requested = true;
  });
  std::thread owner([&] {
    while (true) {
      {
        absl::MutexLock lock(&mu);
        auto woken = [&] { return requested || done; };
        mu.Await(absl::Condition(&woken));
        if (done && !requested) return;
        requested = false;
      }
      producer.CommitQueuedInto(tb.get());
    }
  });
  auto writer = producer.CreateTraceWriter(1);
  constexpr uint64_t kPackets = 16 * 8 * 4;  // Four 1000-byte packets a chunk.
  for (uint64_t i = 1; i <= kPackets; i++) {
    auto packet = writer->NewTracePacket();
    packet->AppendVarInt(TracePacket::kTimestampFieldNumber, i);
    packet->AppendString(TracePacket::kSynchronizationMarkerFieldNumber, std::string(1000, 'x'));
  }
  writer->Flush();
  {
    absl::MutexLock lock(&mu);
    done = true;
  }
  owner.join();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), kPackets);
  for (uint64_t i = 0; i < kPackets; i++) {
    EXPECT_EQ(TimestampOf(reads[i]), i + 1);
    EXPECT_EQ(reads[i].loss, 0u);
  }
  const ProducerBuffer::Stats s = producer.stats();
  EXPECT_EQ(s.chunks_dropped(), 0u);
  EXPECT_EQ(s.stall_timeouts, 0u);
}

TEST(ProducerBufferTest, WritersFillChunksOfTheConfiguredSize) {
  // A 6000-byte packet fits one 8 KiB chunk but takes two of 4 KiB.
  for (size_t chunk_size : {size_t{4096}, size_t{8192}}) {
    ProducerBuffer::Options o = Pool(4);
    o.chunk_size = chunk_size;
    ProducerBuffer producer(1, {}, o);
    auto writer = producer.CreateTraceWriter(1);
    {
      auto packet = writer->NewTracePacket();
      packet->AppendString(TracePacket::kSynchronizationMarkerFieldNumber, std::string(6000, 'x'));
    }
    writer->Flush();
    EXPECT_EQ(producer.stats().chunks_committed, chunk_size == 4096 ? 2u : 1u) << chunk_size;
  }
}

}  // namespace
}  // namespace ringside::agent
