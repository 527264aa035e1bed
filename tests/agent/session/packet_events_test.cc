#include "agent/session/packet_events.h"

#include <map>
#include <string>
#include <utility>

#include "buffer/wire_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

// A bundle with two full events and a compact_sched of three switches and
// two wakings: seven kernel events.
TracePacket SevenEventPacket() {
  TracePacket p;
  auto* bundle = p.mutable_ftrace_events();
  bundle->set_cpu(1);
  bundle->add_event()->set_timestamp(1);
  bundle->add_event()->set_timestamp(2);
  auto* compact = bundle->mutable_compact_sched();
  // Large deltas take several varint bytes; each still counts once.
  for (uint64_t ts : {1'000'000'000'000ull, 300ull, 5ull}) compact->add_switch_timestamp(ts);
  for (uint64_t ts : {1'000'000'000'001ull, 70'000ull}) compact->add_waking_timestamp(ts);
  compact->add_switch_next_pid(123456);  // Other columns are not events.
  return p;
}

TEST(PacketEventsTest, CountsFullAndCompactEventsOfABundle) {
  EXPECT_EQ(CountEventsInPacket(SevenEventPacket().SerializeAsString()), 7u);
}

TEST(PacketEventsTest, CountsEventsByCpuAndTheFieldTheyAreWrittenAs) {
  TracePacket p;
  auto* bundle = p.mutable_ftrace_events();
  bundle->set_cpu(3);
  bundle->add_event()->mutable_sched_process_fork()->set_child_pid(7);
  bundle->add_event()->mutable_sched_process_fork()->set_child_pid(8);
  bundle->add_event()->mutable_sched_process_exit()->set_pid(7);
  bundle->add_event()->set_timestamp(1);  // No payload: kind 0.
  for (uint64_t ts : {10ull, 20ull}) bundle->mutable_compact_sched()->add_switch_timestamp(ts);
  bundle->mutable_compact_sched()->add_waking_timestamp(30);
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> counted;
  CountEventsByKind(p.SerializeAsString(), [&](uint32_t cpu, uint32_t field, uint64_t n) {
    counted[{cpu, field}] += n;
  });
  using trace::FtraceEvent;
  const std::map<std::pair<uint32_t, uint32_t>, uint64_t> expected = {
      {{3, FtraceEvent::kSchedProcessForkFieldNumber}, 2},
      {{3, FtraceEvent::kSchedProcessExitFieldNumber}, 1},
      {{3, 0}, 1},
      {{3, FtraceEvent::kSchedSwitchFieldNumber}, 2},
      {{3, FtraceEvent::kSchedWakingFieldNumber}, 1}};
  EXPECT_EQ(counted, expected);
  EXPECT_EQ(CountEventsInPacket(p.SerializeAsString()), 7u);
}

// An event's kind is its first length-delimited field, whatever fields come
// before it; an event malformed before its payload has kind 0 and still
// counts as one event. The CPU counts for the whole bundle wherever it is.
TEST(PacketEventsTest, AnEventsKindIsItsFirstLengthDelimitedField) {
  using buffer::WireType;
  auto event = [](const std::string& fields) {
    std::string e;
    buffer::AppendLengthDelimitedField(2, fields, &e);  // FtraceEventBundle.event
    return e;
  };
  std::string fixed;  // Fixed-width fields, then sched_wakeup (74).
  buffer::AppendTag(40, WireType::kFixed64, &fixed);
  fixed.append(8, '\xff');
  buffer::AppendTag(41, WireType::kFixed32, &fixed);
  fixed.append(4, '\x80');
  buffer::AppendVarIntField(1, 1'000'000'000'000, &fixed);
  buffer::AppendLengthDelimitedField(74, "", &fixed);
  buffer::AppendLengthDelimitedField(75, "x", &fixed);
  std::string truncated;  // A payload whose length runs past the event.
  buffer::AppendVarIntField(1, 5, &truncated);
  buffer::AppendTag(74, WireType::kLengthDelimited, &truncated);
  buffer::AppendVarInt(9, &truncated);
  std::string endless_varint;  // A varint with no last byte.
  buffer::AppendTag(1, WireType::kVarInt, &endless_varint);
  endless_varint.append(3, '\x80');
  std::string bundle = event(fixed) + event(truncated) + event(endless_varint) + event(fixed);
  buffer::AppendVarIntField(1, 5, &bundle);  // cpu, after the events.
  std::string packet;
  buffer::AppendLengthDelimitedField(1, bundle, &packet);  // TracePacket.ftrace_events
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> counted;
  CountEventsByKind(packet, [&](uint32_t cpu, uint32_t field, uint64_t n) {
    counted[{cpu, field}] += n;
  });
  const std::map<std::pair<uint32_t, uint32_t>, uint64_t> expected = {{{5, 74}, 2}, {{5, 0}, 2}};
  EXPECT_EQ(counted, expected);
}

TEST(PacketEventsTest, PacketWithoutABundleHasNoEvents) {
  TracePacket p;
  p.set_timestamp(5);
  p.mutable_process_tree()->add_processes()->set_pid(1);
  EXPECT_EQ(CountEventsInPacket(p.SerializeAsString()), 0u);
}

TEST(PacketEventsTest, TruncatedPacketCountsOnlyWhatIsReadable) {
  const std::string bytes = SevenEventPacket().SerializeAsString();
  // Every cut stays within bounds and never counts more than the whole.
  for (size_t cut = 0; cut <= bytes.size(); cut++) {
    EXPECT_LE(CountEventsInPacket(bytes.substr(0, cut)), 7u) << cut;
  }
  // Cut inside the bundle's length-delimited payload: the bundle is unreadable.
  EXPECT_EQ(CountEventsInPacket(bytes.substr(0, bytes.size() - 1)), 0u);
}

// The session appends its trusted fields to a packet's bytes (BufferPacketReader).
TEST(PacketEventsTest, VarIntFieldAppendedToAPacketMergesIntoIt) {
  TracePacket p;
  p.set_timestamp(5);
  std::string bytes = p.SerializeAsString();
  buffer::AppendVarIntField(TracePacket::kTrustedPacketSequenceIdFieldNumber, 300, &bytes);
  TracePacket merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  EXPECT_EQ(merged.timestamp(), 5u);
  EXPECT_EQ(merged.trusted_packet_sequence_id(), 300u);
}

}  // namespace
}  // namespace ringside::agent
