#include "agent/session/service_packets.h"

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

}  // namespace
}  // namespace ringside::agent
