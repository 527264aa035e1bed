#include "agent/session/service_packets.h"

#include <memory>
#include <vector>

#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

// A reader that waited for chunks and one that then gave up: the trace's
// stats tell the waits (which lost nothing, but slowed the reader and may
// explain staging-ring losses) from the drops.
TEST(ServicePacketsTest, ProducerStatsCarryThePoolsWaitsAndTimeouts) {
  SourceStats s;
  s.data_source = "linux.bpf";
  s.producer.chunks_committed = 40;
  s.producer.pool_exhausted = 5;
  s.producer.stalls = 4;
  s.producer.stall_timeouts = 1;
  s.producer.stall_ns = 123'000'000;
  const trace::TracePacket p = TraceStatsPacket(7, {s}, {}, nullptr);
  ASSERT_EQ(p.trace_stats().ringside_producer_stats_size(), 1);
  const auto& ps = p.trace_stats().ringside_producer_stats(0);
  EXPECT_EQ(ps.data_source(), "linux.bpf");
  EXPECT_EQ(ps.chunks_committed(), 40u);
  EXPECT_EQ(ps.pool_exhausted(), 5u);
  EXPECT_EQ(ps.stalls(), 4u);
  EXPECT_EQ(ps.stalled_ns(), 123'000'000u);
  EXPECT_EQ(ps.stall_timeouts(), 1u);
  // One exhaustion without a wait (no committer) and one timed-out wait.
  EXPECT_EQ(s.producer.chunks_dropped(), 2u);
}

// The end of a recording's stats: what each stage lost, by source, CPU and
// kind; the durable store's capacity; each buffer's size, and how many
// buffers there were.
TEST(ServicePacketsTest, TraceStatsCarryEventLossesTheDurableStoreAndEachBuffer) {
  const std::unique_ptr<buffer::TraceBuffer> a =
      buffer::TraceBuffer::Create(64 << 10, buffer::TraceBuffer::OverwritePolicy::kOverwrite);
  const std::unique_ptr<buffer::TraceBuffer> b =
      buffer::TraceBuffer::Create(128 << 10, buffer::TraceBuffer::OverwritePolicy::kDiscard);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const buffer::DurableStore durable(32 << 10, 64 << 10);
  const std::vector<EventLoss> losses = {{"linux.ftrace", 3, "sched_switch", "buffer", 17}};
  const trace::TracePacket p = TraceStatsPacket(9, {}, {a.get(), b.get()}, &durable, &losses);
  EXPECT_EQ(p.timestamp(), 9u);
  const trace::TraceStats& st = p.trace_stats();
  ASSERT_EQ(st.ringside_event_loss_size(), 1);
  EXPECT_EQ(st.ringside_event_loss(0).data_source(), "linux.ftrace");
  EXPECT_EQ(st.ringside_event_loss(0).cpu(), 3u);
  EXPECT_EQ(st.ringside_event_loss(0).kind(), "sched_switch");
  EXPECT_EQ(st.ringside_event_loss(0).stage(), "buffer");
  EXPECT_EQ(st.ringside_event_loss(0).events_lost(), 17u);
  EXPECT_EQ(st.ringside_durable_buffer().capacity(), 32u << 10);
  ASSERT_EQ(st.buffer_stats_size(), 2);
  EXPECT_EQ(st.buffer_stats(0).buffer_size(), 64u << 10);
  EXPECT_EQ(st.buffer_stats(1).buffer_size(), 128u << 10);
  EXPECT_EQ(st.total_buffers(), 2u);
}

// Without the losses (a file that holds part of the recording) and without
// a durable store, neither is stated.
TEST(ServicePacketsTest, TraceStatsLeaveOutWhatIsNotKnown) {
  const trace::TracePacket p = TraceStatsPacket(9, {}, {}, nullptr);
  EXPECT_EQ(p.trace_stats().ringside_event_loss_size(), 0);
  EXPECT_FALSE(p.trace_stats().has_ringside_durable_buffer());
  EXPECT_EQ(p.trace_stats().total_buffers(), 0u);
}

}  // namespace
}  // namespace ringside::agent
