#include "agent/files/stats_merging_sink.h"

#include <string>

#include "agent/writer/wire_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

std::string Framed(const trace::TracePacket& packet) {
  std::string out;
  AppendFramedPacket(packet.SerializeAsString(), &out);
  return out;
}

trace::TracePacket StatsPacket() {
  trace::TracePacket p;
  p.set_timestamp(77);
  p.mutable_trace_stats()->add_buffer_stats()->set_chunks_written(5);
  p.mutable_trace_stats()->set_producers_connected(2);
  return p;
}

trace::TracePacket EventPacket(uint64_t ts) {
  trace::TracePacket p;
  p.set_timestamp(ts);
  p.mutable_ftrace_events()->set_cpu(1);
  return p;
}

trace::TraceStats Extra() {
  trace::TraceStats extra;
  trace::TraceStats::TriggerCount* c = extra.add_ringside_triggers();
  c->set_name("crash");
  c->set_fired(1);
  c->set_joined(49);
  extra.add_ringside_snapshot_triggers()->set_trigger_name("crash");
  return extra;
}

trace::Trace Parsed(const StringSink& sink) {
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(sink.data()));
  return t;
}

// As a session writes a snapshot: batches of packets, then the rest with
// trace_stats last, then Finish().
TEST(StatsMergingSinkTest, MergesIntoTheTraceStatsPacketWrittenLast) {
  StringSink inner;
  StatsMergingSink sink(&inner, Extra());
  ASSERT_TRUE(sink.Write(Framed(EventPacket(1)) + Framed(EventPacket(2))).ok());
  ASSERT_TRUE(sink.Write(Framed(EventPacket(3)) + Framed(StatsPacket())).ok());
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_TRUE(sink.merged());
  EXPECT_TRUE(inner.finished());
  const trace::Trace t = Parsed(inner);
  ASSERT_EQ(t.packet_size(), 4);
  for (int i = 0; i < 3; i++) EXPECT_EQ(t.packet(i).timestamp(), uint64_t(i + 1));
  const trace::TracePacket& stats = t.packet(3);
  EXPECT_EQ(stats.timestamp(), 77u);
  EXPECT_EQ(stats.trace_stats().producers_connected(), 2u);
  EXPECT_EQ(stats.trace_stats().buffer_stats(0).chunks_written(), 5u);
  ASSERT_EQ(stats.trace_stats().ringside_triggers_size(), 1);
  EXPECT_EQ(stats.trace_stats().ringside_triggers(0).joined(), 49u);
  ASSERT_EQ(stats.trace_stats().ringside_snapshot_triggers_size(), 1);
  EXPECT_EQ(stats.trace_stats().ringside_snapshot_triggers(0).trigger_name(), "crash");
}

TEST(StatsMergingSinkTest, ATraceWhoseLastPacketIsNotStatsPassesUnchanged) {
  StringSink inner;
  StatsMergingSink sink(&inner, Extra());
  const std::string bytes = Framed(StatsPacket()) + Framed(EventPacket(9));
  ASSERT_TRUE(sink.Write(bytes).ok());
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_FALSE(sink.merged());
  EXPECT_EQ(inner.data(), bytes);
}

// Nothing is held back from bytes it cannot split into packets.
TEST(StatsMergingSinkTest, BytesThatAreNotFramedPacketsPassThrough) {
  StringSink inner;
  StatsMergingSink sink(&inner, Extra());
  ASSERT_TRUE(sink.Write("\x0a\x05oops").ok());
  EXPECT_EQ(inner.data(), "\x0a\x05oops");
  EXPECT_EQ(sink.bytes_written(), 6u);
}

}  // namespace
}  // namespace ringside::agent
