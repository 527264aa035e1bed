#include "agent/session/buffer_reader.h"

#include <memory>
#include <string>
#include <vector>

#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

// Two writers' packets, timestamps 1..n each, committed into `buffer`.
void WritePackets(ProducerBuffer* producer, buffer::TraceBuffer* buffer, int n) {
  auto a = producer->CreateTraceWriter(1);
  auto b = producer->CreateTraceWriter(2);
  for (int i = 1; i <= n; i++) {
    for (TraceWriter* w : {a.get(), b.get()}) {
      auto packet = w->NewTracePacket();
      packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, static_cast<uint64_t>(i));
      packet->AppendString(9999, std::string(100, 'x'));  // Padding: an unknown field.
    }
  }
  a->Flush();
  b->Flush();
  producer->CommitQueuedInto(buffer);
}

// Each sequence's timestamps, in the order read.
std::vector<std::vector<uint64_t>> Timestamps(const std::string& framed) {
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(framed));
  std::vector<std::vector<uint64_t>> by_seq(8);
  for (const trace::TracePacket& p : t.packet()) {
    by_seq.at(p.trusted_packet_sequence_id()).push_back(p.timestamp());
  }
  return by_seq;
}

TEST(BufferPacketReaderTest, ReadingInBatchesGetsEveryPacketOnceInOrder) {
  auto tb = buffer::TraceBuffer::Create(4 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  WritePackets(&producer, tb.get(), 3000);

  BufferPacketReader reader;
  std::string all;
  int batches = 0;
  for (bool done = false; !done; batches++) {
    std::string out;
    done = reader.ReadSome({tb.get()}, &out, 16 << 10);
    EXPECT_LE(out.size(), (16u << 10) + 200);  // Whole packets, just past the cap.
    all += out;
    ASSERT_LT(batches, 1000);
  }
  EXPECT_GT(batches, 20);
  const std::vector<std::vector<uint64_t>> seqs = Timestamps(all);
  int sequences = 0;
  for (const std::vector<uint64_t>& ts : seqs) {
    if (ts.empty()) continue;
    sequences++;
    ASSERT_EQ(ts.size(), 3000u);
    for (size_t i = 0; i < ts.size(); i++) EXPECT_EQ(ts[i], i + 1);
  }
  EXPECT_EQ(sequences, 2);
  std::string rest;
  EXPECT_TRUE(reader.ReadSome({tb.get()}, &rest, 16 << 10));
  EXPECT_TRUE(rest.empty());
}

// Every packet read carries the machine's id, the producers' own too (a
// field a producer set is overridden: the reader's comes last).
TEST(BufferPacketReaderTest, EveryPacketCarriesTheMachineId) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  {
    auto w = producer.CreateTraceWriter(3);
    auto packet = w->NewTracePacket();
    packet->AppendVarInt(trace::TracePacket::kMachineIdFieldNumber, 7);
  }
  WritePackets(&producer, tb.get(), 10);
  BufferPacketReader reader;
  reader.set_machine_id(0x3d1219c7);
  std::string out;
  reader.ReadInto({tb.get()}, &out);
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(out));
  ASSERT_EQ(t.packet_size(), 21);
  for (const trace::TracePacket& p : t.packet()) EXPECT_EQ(p.machine_id(), 0x3d1219c7u);
}

}  // namespace
}  // namespace ringside::agent
