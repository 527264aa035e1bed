#include "agent/writer/trace_writer.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

using Read = testing::ReadPacket;

std::vector<Read> ReadAll(buffer::TraceBuffer* buffer) { return testing::ReadAllPackets(buffer); }

ProducerBuffer::Options PoolOptions(size_t chunks, PoolExhaustedPolicy policy) {
  ProducerBuffer::Options o;
  o.num_chunks = chunks;
  o.policy = policy;
  return o;
}

// Writes `payload` as ftrace_events { cpu event { timestamp print { buf } } }:
// three nested messages, all open while the string crosses chunk boundaries.
void WritePrintPacket(TraceWriter* writer, uint64_t ts, const std::string& payload) {
  auto packet = writer->NewTracePacket();
  packet->AppendVarInt(TracePacket::kTimestampFieldNumber, ts);
  ProtoMessage* bundle = packet->BeginNested(TracePacket::kFtraceEventsFieldNumber);
  bundle->AppendVarInt(trace::FtraceEventBundle::kCpuFieldNumber, 3);
  ProtoMessage* event = bundle->BeginNested(trace::FtraceEventBundle::kEventFieldNumber);
  event->AppendVarInt(trace::FtraceEvent::kTimestampFieldNumber, ts);
  event->AppendVarInt(trace::FtraceEvent::kPidFieldNumber, 42);
  ProtoMessage* print = event->BeginNested(trace::FtraceEvent::kPrintFieldNumber);
  print->AppendString(trace::PrintFtraceEvent::kBufFieldNumber, payload);
  // A field after the nested message: closes print and event implicitly.
  bundle->AppendBool(trace::FtraceEventBundle::kLostEventsFieldNumber, false);
}

TracePacket ExpectedPrintPacket(uint64_t ts, const std::string& payload) {
  TracePacket p;
  p.set_timestamp(ts);
  auto* bundle = p.mutable_ftrace_events();
  bundle->set_cpu(3);
  auto* event = bundle->add_event();
  event->set_timestamp(ts);
  event->set_pid(42);
  event->mutable_print()->set_buf(payload);
  bundle->set_lost_events(false);
  return p;
}

std::string Payload(size_t size, uint64_t seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; i++) s[i] = static_cast<char>('a' + (seed * 31 + i * 7) % 26);
  return s;
}

TEST(TraceWriterTest, PacketsFrom1ByteTo1MiBRoundTripThroughTheBuffer) {
  auto tb = buffer::TraceBuffer::Create(16 << 20);
  ProducerBuffer producer(1, buffer::ClientIdentity{0, 1},
                          PoolOptions(600, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(7);
  const size_t sizes[] = {1, 2, 100, 4000, 4077, 4096, 9000, 65536, 300000, 1 << 20, 3, 70};
  for (size_t i = 0; i < std::size(sizes); i++) {
    WritePrintPacket(writer.get(), 1000 + i, Payload(sizes[i], i));
    producer.CommitQueuedInto(tb.get());
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());

  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), std::size(sizes));
  for (size_t i = 0; i < std::size(sizes); i++) {
    SCOPED_TRACE("packet of " + std::to_string(sizes[i]));
    TracePacket expected = ExpectedPrintPacket(1000 + i, Payload(sizes[i], i));
    if (i == 0) {
      expected.set_first_packet_on_sequence(true);
      expected.set_sequence_flags(TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    }
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(reads[i].packet, expected));
    EXPECT_EQ(reads[i].loss, 0u);
    EXPECT_EQ(reads[i].writer, 7);
  }
  // Lengths left open in committed chunks went out as patches, and applied.
  EXPECT_GT(writer->stats().patches_sent, 0u);
  EXPECT_EQ(tb->stats().patches_succeeded, writer->stats().patches_sent);
  EXPECT_EQ(tb->stats().patches_failed, 0u);
  EXPECT_EQ(writer->stats().packets_written, std::size(sizes));
}

TEST(TraceWriterTest, SequenceWaitsForItsPatchesThenReads) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(16, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  {
    auto packet = writer->NewTracePacket();
    ProtoMessage* bundle = packet->BeginNested(TracePacket::kFtraceEventsFieldNumber);
    ProtoMessage* event = bundle->BeginNested(trace::FtraceEventBundle::kEventFieldNumber);
    ProtoMessage* print = event->BeginNested(trace::FtraceEvent::kPrintFieldNumber);
    print->AppendString(trace::PrintFtraceEvent::kBufFieldNumber, Payload(6000, 1));
    producer.CommitQueuedInto(tb.get());
    // The first chunk is committed but its length is still open.
    EXPECT_TRUE(ReadAll(tb.get()).empty());
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].packet.ftrace_events().event(0).print().buf(), Payload(6000, 1));
}

TEST(TraceWriterTest, DropPolicyCountsDropsAndFlagsTheNextPacket) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(4, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  // Nobody drains: after four chunks the pool is empty.
  for (uint64_t i = 0; i < 40; i++) WritePrintPacket(writer.get(), i, Payload(900, i));
  const uint64_t dropped = writer->stats().packets_dropped;
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(producer.stats().pool_exhausted, 0u);
  producer.CommitQueuedInto(tb.get());
  for (uint64_t i = 40; i < 45; i++) WritePrintPacket(writer.get(), i, Payload(900, i));
  writer->Flush();
  producer.CommitQueuedInto(tb.get());

  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 45 - dropped);
  uint64_t expected_ts = 0;
  for (const Read& r : reads) {
    const uint64_t ts = r.packet.timestamp();
    // The loss flag is on exactly the first packet after the gap.
    EXPECT_EQ(r.loss != 0, ts != expected_ts) << "ts " << ts;
    if (r.loss != 0) {
      EXPECT_TRUE(r.loss & buffer::kDataLossWriterAbort);
    }
    expected_ts = ts + 1;
  }
  EXPECT_EQ(reads.back().packet.timestamp(), 44u);
}

TEST(TraceWriterTest, DropInTheMiddleOfAPacketLosesOnlyThatPacket) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(2, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  WritePrintPacket(writer.get(), 1, Payload(3000, 1));
  WritePrintPacket(writer.get(), 2, Payload(9000, 2));  // Needs 3 chunks; has 1 more.
  EXPECT_EQ(writer->stats().packets_dropped, 1u);
  producer.CommitQueuedInto(tb.get());
  WritePrintPacket(writer.get(), 3, Payload(100, 3));
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].packet.timestamp(), 1u);
  EXPECT_EQ(reads[0].loss, 0u);
  EXPECT_EQ(reads[1].packet.timestamp(), 3u);
  EXPECT_TRUE(reads[1].loss & buffer::kDataLossWriterAbort);
}

TEST(TraceWriterTest, StallPolicyWaitsForTheOwnerAndLosesNothing) {
  auto tb = buffer::TraceBuffer::Create(8 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(2, PoolExhaustedPolicy::kStall));
  producer.AttachCommitter([] {});  // The owner commits all the time.
  std::atomic<bool> done{false};
  std::thread owner([&] {
    while (!done.load()) {
      producer.CommitQueuedInto(tb.get());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  {
    auto writer = producer.CreateTraceWriter(1);
    for (uint64_t i = 0; i < 300; i++) WritePrintPacket(writer.get(), i, Payload(3000, i));
    writer->Flush();
    EXPECT_EQ(writer->stats().packets_dropped, 0u);
  }
  done = true;
  owner.join();
  producer.CommitQueuedInto(tb.get());
  EXPECT_GT(producer.stats().stalls, 0u);
  EXPECT_GT(producer.stats().stall_ns, 0u);
  EXPECT_EQ(producer.stats().stall_timeouts, 0u);
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 300u);
  for (size_t i = 0; i < reads.size(); i++) {
    EXPECT_EQ(reads[i].packet.timestamp(), i);
    EXPECT_EQ(reads[i].loss, 0u);
  }
}

TEST(TraceWriterTest, StallIsBoundedThenDrops) {
  ProducerBuffer::Options o = PoolOptions(1, PoolExhaustedPolicy::kStall);
  o.stall_timeout = absl::Milliseconds(20);
  ProducerBuffer producer(1, {}, o);
  producer.AttachCommitter([] {});  // An owner that never commits.
  auto writer = producer.CreateTraceWriter(1);
  const absl::Time start = absl::Now();
  for (uint64_t i = 0; i < 3; i++) WritePrintPacket(writer.get(), i, Payload(3000, i));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_GT(producer.stats().stall_timeouts, 0u);
  EXPECT_GT(writer->stats().packets_dropped, 0u);
}

TEST(TraceWriterTest, ScrapedChunkIsReadAndItsFinalCommitAddsOnlyTheRest) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(8, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  for (uint64_t i = 0; i < 3; i++) WritePrintPacket(writer.get(), i, Payload(50, i));
  {
    // A packet in progress while the service scrapes: it must not be read.
    auto open = writer->NewTracePacket();
    open->AppendVarInt(TracePacket::kTimestampFieldNumber, 3);
    producer.ScrapeWriters();
    producer.CommitQueuedInto(tb.get());
    std::vector<Read> reads = ReadAll(tb.get());
    ASSERT_EQ(reads.size(), 3u);
    EXPECT_EQ(reads[2].packet.timestamp(), 2u);
  }
  WritePrintPacket(writer.get(), 4, Payload(50, 4));
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].packet.timestamp(), 3u);
  EXPECT_EQ(reads[1].packet.timestamp(), 4u);
  for (const Read& r : reads) EXPECT_EQ(r.loss, 0u);
  EXPECT_EQ(producer.stats().chunks_scraped, 1u);
  EXPECT_EQ(tb->stats().chunks_rewritten, 1u);
}

TEST(TraceWriterTest, NothingIsCommittedUntilAChunkFillsOrAFlush) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(8, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  WritePrintPacket(writer.get(), 1, "x");
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 0u);
  writer->Flush();
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 1u);
  EXPECT_EQ(ReadAll(tb.get()).size(), 1u);
  writer->Flush();  // Nothing new: nothing committed.
  EXPECT_EQ(producer.CommitQueuedInto(tb.get()), 0u);
}

TEST(TraceWriterTest, WritersOnManyThreadsStayInOrderPerSequence) {
  auto tb = buffer::TraceBuffer::Create(32 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(64, PoolExhaustedPolicy::kStall));
  producer.AttachCommitter([] {});  // The owner commits all the time.
  std::atomic<bool> done{false};
  std::thread owner([&] {
    while (!done.load()) {
      producer.CommitQueuedInto(tb.get());
      std::this_thread::yield();
    }
  });
  constexpr int kWriters = 4;
  constexpr uint64_t kPackets = 5000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; w++) {
    threads.emplace_back([&, w] {
      auto writer = producer.CreateTraceWriter(static_cast<buffer::WriterID>(w));
      for (uint64_t i = 0; i < kPackets; i++) {
        WritePrintPacket(writer.get(), i, Payload(20 + (i * 37 + w) % 700, i));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done = true;
  owner.join();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), kWriters * kPackets);
  std::vector<uint64_t> next(kWriters, 0);
  for (const Read& r : reads) {
    ASSERT_LT(r.writer, kWriters);
    EXPECT_EQ(r.packet.timestamp(), next[r.writer]++);
    EXPECT_EQ(r.loss, 0u);
  }
}

TEST(TraceWriterTest, InterningAndIncrementalStateClear) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(8, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  constexpr uint32_t kEventNames = trace::InternedData::kEventNamesFieldNumber;
  bool is_new = false;
  const uint64_t a = writer->Intern(kEventNames, "sched_switch", &is_new);
  EXPECT_TRUE(is_new);
  EXPECT_EQ(writer->Intern(kEventNames, "sched_switch", &is_new), a);
  EXPECT_FALSE(is_new);
  const uint64_t b = writer->Intern(kEventNames, "sched_waking", &is_new);
  EXPECT_NE(a, b);
  // Tables are separate per InternedData field.
  writer->Intern(trace::InternedData::kEventCategoriesFieldNumber, "sched_switch", &is_new);
  EXPECT_TRUE(is_new);

  { auto p = writer->NewTracePacket(/*needs_incremental_state=*/true); }
  writer->RequestIncrementalStateClear();  // As the service does on a new file.
  { auto p = writer->NewTracePacket(true); }
  EXPECT_TRUE(writer->incremental_state_cleared());
  const uint64_t a2 = writer->Intern(kEventNames, "sched_switch", &is_new);
  EXPECT_TRUE(is_new);  // Must be emitted again...
  EXPECT_NE(a2, a);     // ...under an id never used before.
  { auto p = writer->NewTracePacket(true); }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());

  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_TRUE(reads[0].packet.first_packet_on_sequence());
  EXPECT_EQ(reads[0].packet.sequence_flags(),
            TracePacket::SEQ_INCREMENTAL_STATE_CLEARED | TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
  EXPECT_EQ(reads[1].packet.sequence_flags(),
            TracePacket::SEQ_INCREMENTAL_STATE_CLEARED | TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
  EXPECT_FALSE(reads[1].packet.has_first_packet_on_sequence());
  EXPECT_EQ(reads[2].packet.sequence_flags(), TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
}

TEST(TraceWriterTest, PackedVarIntsAndFixedFieldsEncodeAsLibprotobufReadsThem) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(8, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  const uint64_t timestamps[] = {1000, 5, 7, 1ull << 40};
  const int32_t pids[] = {1, -1, 300000};
  {
    auto packet = writer->NewTracePacket();
    ProtoMessage* bundle = packet->BeginNested(TracePacket::kFtraceEventsFieldNumber);
    ProtoMessage* compact = bundle->BeginNested(trace::FtraceEventBundle::kCompactSchedFieldNumber);
    using CS = trace::FtraceEventBundle::CompactSched;
    compact->AppendPackedVarInts(CS::kSwitchTimestampFieldNumber, timestamps, 4);
    compact->AppendPackedVarInts(CS::kSwitchNextPidFieldNumber, pids, 3);
    compact->AppendString(CS::kInternTableFieldNumber, "swapper/0");
    packet->AppendInt(TracePacket::kTrustedUidFieldNumber, -5);
  }
  {
    auto packet = writer->NewTracePacket();
    ProtoMessage* stats = packet->BeginNested(TracePacket::kFtraceStatsFieldNumber);
    ProtoMessage* cpu = stats->BeginNested(trace::FtraceStats::kCpuStatsFieldNumber);
    cpu->AppendFixed64(trace::FtraceCpuStats::kOldestEventTsFieldNumber, 0x3ff0000000000000);
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 2u);
  const auto& cs = reads[0].packet.ftrace_events().compact_sched();
  ASSERT_EQ(cs.switch_timestamp_size(), 4);
  EXPECT_EQ(cs.switch_timestamp(3), 1ull << 40);
  ASSERT_EQ(cs.switch_next_pid_size(), 3);
  EXPECT_EQ(cs.switch_next_pid(1), -1);
  EXPECT_EQ(cs.intern_table(0), "swapper/0");
  EXPECT_EQ(reads[0].packet.trusted_uid(), -5);
  EXPECT_EQ(reads[1].packet.ftrace_stats().cpu_stats(0).oldest_event_ts(), 1.0);
}

// Columns far longer than a chunk, of every varint length from 1 to 10
// bytes, cross chunk ends at every offset: each value reads back as written.
TEST(TraceWriterTest, PackedColumnsLongerThanAChunkReadBackWhole) {
  auto tb = buffer::TraceBuffer::Create(4 << 20);
  ProducerBuffer producer(1, {}, PoolOptions(64, PoolExhaustedPolicy::kDrop));
  auto writer = producer.CreateTraceWriter(1);
  std::vector<uint64_t> timestamps;
  std::vector<int32_t> pids;
  std::vector<int64_t> states;
  for (uint64_t i = 0; i < 5000; i++) {
    timestamps.push_back((i * 2654435761u) >> (i % 64));  // 1 to 10 bytes.
    pids.push_back(i % 7 == 0 ? -static_cast<int32_t>(i) : static_cast<int32_t>(i * 37));
    states.push_back(i % 5 == 0 ? INT64_MIN + static_cast<int64_t>(i) : static_cast<int64_t>(i));
  }
  {
    auto packet = writer->NewTracePacket();
    ProtoMessage* bundle = packet->BeginNested(TracePacket::kFtraceEventsFieldNumber);
    ProtoMessage* compact = bundle->BeginNested(trace::FtraceEventBundle::kCompactSchedFieldNumber);
    using CS = trace::FtraceEventBundle::CompactSched;
    compact->AppendPackedVarInts(CS::kSwitchTimestampFieldNumber, timestamps.data(),
                                 timestamps.size());
    compact->AppendPackedVarInts(CS::kSwitchNextPidFieldNumber, pids.data(), pids.size());
    compact->AppendPackedVarInts(CS::kSwitchPrevStateFieldNumber, states.data(), states.size());
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  EXPECT_EQ(writer->stats().packets_dropped, 0u);
  std::vector<Read> reads = ReadAll(tb.get());
  ASSERT_EQ(reads.size(), 1u);
  const auto& cs = reads[0].packet.ftrace_events().compact_sched();
  ASSERT_EQ(cs.switch_timestamp_size(), 5000);
  ASSERT_EQ(cs.switch_next_pid_size(), 5000);
  ASSERT_EQ(cs.switch_prev_state_size(), 5000);
  for (int i = 0; i < 5000; i++) {
    ASSERT_EQ(cs.switch_timestamp(i), timestamps[i]) << i;
    ASSERT_EQ(cs.switch_next_pid(i), pids[i]) << i;
    ASSERT_EQ(cs.switch_prev_state(i), states[i]) << i;
  }
}

}  // namespace
}  // namespace ringside::agent
