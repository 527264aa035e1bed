#include "agent/writer/wire_format.h"

#include <string_view>

#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

using buffer::WireType;

// Field numbers (trace_packet.proto, ftrace_event_bundle.proto).
constexpr uint32_t kPacketFtraceEvents = 1;
constexpr uint32_t kBundleEvent = 2;
constexpr uint32_t kBundleCompactSched = 4;
constexpr uint32_t kCompactSwitchTimestamp = 1;
constexpr uint32_t kCompactWakingTimestamp = 7;
constexpr uint32_t kBundleCpu = 1;
constexpr uint32_t kEventSchedSwitch = 4;
constexpr uint32_t kEventSchedWaking = 20;

// Calls `on_field(field)` for each field of a message; stops at the first
// malformed byte.
template <typename F>
void ForEachField(std::string_view msg, F on_field) {
  const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
  const uint8_t* end = p + msg.size();
  buffer::Field field;
  while (p < end && buffer::ReadField(&p, end, &field)) on_field(field);
}

}  // namespace

void AppendFramedPacket(absl::string_view packet, std::string* out) {
  buffer::AppendLengthDelimitedField(buffer::kTracePacketFieldNumber,
                                     std::string_view(packet.data(), packet.size()), out);
}

void AppendVarIntField(uint32_t field, uint64_t value, std::string* out) {
  buffer::AppendVarIntField(field, value, out);
}

uint64_t CountEventsInPacket(absl::string_view packet) {
  uint64_t events = 0;
  CountEventsByKind(packet, [&](uint32_t, uint32_t, uint64_t n) { events += n; });
  return events;
}

void CountEventsByKind(
    absl::string_view packet,
    absl::FunctionRef<void(uint32_t cpu, uint32_t field, uint64_t n)> on_events) {
  ForEachField(std::string_view(packet.data(), packet.size()), [&](const buffer::Field& f) {
    if (f.number != kPacketFtraceEvents || f.type != WireType::kLengthDelimited) return;
    // The CPU may come after the events (it does not in ours): the bundle
    // is counted once it is known.
    uint32_t cpu = 0;
    ForEachField(f.bytes, [&](const buffer::Field& b) {
      if (b.number == kBundleCpu && b.type == WireType::kVarInt) {
        cpu = static_cast<uint32_t>(b.int_value);
      }
    });
    // Runs of one kind are reported together: a bundle is mostly one kind.
    uint32_t run_field = 0;
    uint64_t run = 0;
    auto add = [&](uint32_t field, uint64_t n) {
      if (n == 0) return;
      if (run > 0 && field != run_field) {
        on_events(cpu, run_field, run);
        run = 0;
      }
      run_field = field;
      run += n;
    };
    ForEachField(f.bytes, [&](const buffer::Field& b) {
      if (b.type != WireType::kLengthDelimited) return;
      if (b.number == kBundleEvent) {
        uint32_t field = 0;
        ForEachField(b.bytes, [&](const buffer::Field& e) {
          if (field == 0 && e.type == WireType::kLengthDelimited) field = e.number;
        });
        add(field, 1);
      } else if (b.number == kBundleCompactSched) {
        ForEachField(b.bytes, [&](const buffer::Field& column) {
          if (column.type != WireType::kLengthDelimited) return;
          if (column.number == kCompactSwitchTimestamp) {
            add(kEventSchedSwitch, buffer::CountPackedVarInts(column.bytes));
          } else if (column.number == kCompactWakingTimestamp) {
            add(kEventSchedWaking, buffer::CountPackedVarInts(column.bytes));
          }
        });
      }
    });
    if (run > 0) on_events(cpu, run_field, run);
  });
}

}  // namespace ringside::agent
