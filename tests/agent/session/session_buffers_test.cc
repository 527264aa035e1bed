#include "agent/session/session_buffers.h"

#include <memory>
#include <string>
#include <vector>

#include "agent/session/buffer_reader.h"
#include "agent/sources/source_factory.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

// Buffers of `sizes_kb`, with a durable store of `durable_kb` (0: none).
config::TraceConfig Config(std::vector<uint32_t> sizes_kb, uint32_t durable_kb) {
  config::TraceConfig config;
  for (uint32_t kb : sizes_kb) config.add_buffers()->set_size_kb(kb);
  config.set_durable_buffer_size_kb(durable_kb);
  return config;
}

// A producer whose chunks go into buffer `target`, as a session's source
// slot holds it.
std::vector<SourceSlot> OneSlot(uint32_t target) {
  std::vector<SourceSlot> slots(1);
  slots[0].name = "test";
  slots[0].target_buffer = target;
  slots[0].producer =
      std::make_unique<ProducerBuffer>(1, buffer::ClientIdentity{}, ProducerBuffer::Options{});
  return slots;
}

// Packets with timestamps 1..n, of about 100 bytes each, by writer
// `writer_id`, queued in the slot's producer (not committed).
void WritePackets(SourceSlot* slot, int n, buffer::WriterID writer_id = 1) {
  auto writer = slot->producer->CreateTraceWriter(writer_id);
  for (int i = 1; i <= n; i++) {
    auto packet = writer->NewTracePacket();
    packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, static_cast<uint64_t>(i));
    packet->AppendString(9999, std::string(100, 'x'));  // Padding: an unknown field.
  }
  writer->Flush();
}

std::vector<uint64_t> Timestamps(const std::string& framed) {
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(framed));
  std::vector<uint64_t> out;
  for (const trace::TracePacket& p : t.packet()) out.push_back(p.timestamp());
  return out;
}

std::vector<uint64_t> OneTo(int n) {
  std::vector<uint64_t> out;
  for (int i = 1; i <= n; i++) out.push_back(static_cast<uint64_t>(i));
  return out;
}

TEST(SessionBuffersTest, OneBufferPerConfiguredBufferAndTheDurableStoreBesideTheFirst) {
  auto buffers = SessionBuffers::Create(Config({64, 128}, 32), 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  EXPECT_EQ((*buffers)->count(), 2u);
  EXPECT_EQ((*buffers)->total_size(), (64u + 128u) << 10);
  EXPECT_TRUE((*buffers)->has_durable_store());
  ASSERT_TRUE((*buffers)->durable_stats().has_value());
  EXPECT_EQ((*buffers)->durable_stats()->capacity, 32u << 10);
  const std::vector<SessionBuffers::Usage> usage = (*buffers)->usage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[1].size, 128u << 10);
  EXPECT_EQ(usage[1].used_bytes, 0u);
}

TEST(SessionBuffersTest, NoDurableStoreWithoutItsSize) {
  auto buffers = SessionBuffers::Create(Config({64}, 0), 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  EXPECT_FALSE((*buffers)->has_durable_store());
  EXPECT_FALSE((*buffers)->durable_stats().has_value());
}

TEST(SessionBuffersTest, WhatAProducerQueuedIsCommittedIntoItsTargetBufferAndReadOnce) {
  auto buffers = SessionBuffers::Create(Config({64, 64}, 0), 7);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  std::vector<SourceSlot> slots = OneSlot(1);
  WritePackets(&slots[0], 10);
  (*buffers)->CommitQueued(slots, nullptr, nullptr);
  const std::vector<SessionBuffers::Usage> usage = (*buffers)->usage();
  EXPECT_EQ(usage[0].stats.chunks_written, 0u);
  EXPECT_GT(usage[1].stats.chunks_written, 0u);

  std::string out;
  (*buffers)->ReadInto(&out);
  EXPECT_EQ(Timestamps(out), OneTo(10));
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(out));
  EXPECT_EQ(t.packet(0).machine_id(), 7u);
  std::string again;
  (*buffers)->ReadInto(&again);
  EXPECT_TRUE(again.empty());
}

TEST(SessionBuffersTest, ReadingInBatchesHandsOverEachBatchUntilEverythingIsRead) {
  auto buffers = SessionBuffers::Create(Config({1024}, 0), 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  std::vector<SourceSlot> slots = OneSlot(0);
  WritePackets(&slots[0], 2000);
  (*buffers)->CommitQueued(slots, nullptr, nullptr);

  std::string out, all;
  int batches = 0;
  EXPECT_TRUE((*buffers)->ReadInBatches(16 << 10, &out, [&] {
    batches++;
    all += out;
    out.clear();
    return true;
  }));
  EXPECT_GT(batches, 10);
  EXPECT_EQ(Timestamps(all), OneTo(2000));
}

TEST(SessionBuffersTest, ReadingInBatchesStopsWhenTheWriterSaysSoAndGoesOnLater) {
  auto buffers = SessionBuffers::Create(Config({1024}, 0), 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  std::vector<SourceSlot> slots = OneSlot(0);
  WritePackets(&slots[0], 2000);
  (*buffers)->CommitQueued(slots, nullptr, nullptr);

  std::string first;
  int batches = 0;
  EXPECT_FALSE((*buffers)->ReadInBatches(16 << 10, &first, [&] {
    batches++;
    return false;  // A failed write: what was read stays in `first`.
  }));
  EXPECT_EQ(batches, 1);
  std::string rest;
  (*buffers)->ReadInto(&rest);
  EXPECT_EQ(Timestamps(first + rest), OneTo(2000));
}

// A snapshot's window is the ring's: what a streaming drain read already is
// in the clone too, and cloning reads nothing of the session's.
TEST(SessionBuffersTest, ACloneHoldsWhatWasReadAlreadyAndLeavesTheReaderAsItWas) {
  auto buffers = SessionBuffers::Create(Config({256}, 0), 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  std::vector<SourceSlot> slots = OneSlot(0);
  WritePackets(&slots[0], 50);
  (*buffers)->CommitQueued(slots, nullptr, nullptr);
  std::string drained;
  (*buffers)->ReadInto(&drained);
  WritePackets(&slots[0], 5, /*writer_id=*/2);
  (*buffers)->CommitQueued(slots, nullptr, nullptr);

  std::vector<std::unique_ptr<buffer::TraceBuffer>> clones;
  ASSERT_TRUE((*buffers)->Clone(4096, &clones).ok());
  ASSERT_EQ(clones.size(), 1u);
  BufferPacketReader reader;
  std::string cloned;
  reader.ReadInto({clones[0].get()}, &cloned);
  EXPECT_EQ(Timestamps(cloned).size(), 55u);

  std::string rest;
  (*buffers)->ReadInto(&rest);
  EXPECT_EQ(Timestamps(rest), OneTo(5));
}

}  // namespace
}  // namespace ringside::agent
