#include "agent/session/packet_events.h"

#include <string_view>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "buffer/wire_format.h"
#include "ringside/trace/ftrace_event.pb.h"
#include "ringside/trace/ftrace_event_bundle.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using buffer::WireType;

using trace::FtraceEvent;
using trace::FtraceEventBundle;
using CompactSched = trace::FtraceEventBundle::CompactSched;

// Calls `on_field(field)` for each field of a message; stops at the first
// malformed byte.
template <typename F>
void ForEachField(std::string_view msg, F on_field) {
  const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
  const uint8_t* end = p + msg.size();
  buffer::Field field;
  while (p < end && buffer::ReadField(&p, end, &field)) on_field(field);
}

// The number of an FtraceEvent's first length-delimited field, its payload
// (the common fields before it are varints), or 0 when it has none or a
// field before it is malformed: what ForEachField would find first, without
// decoding the values it skips. Called for every event the drain reads.
uint32_t PayloadField(std::string_view event) {
  const auto* p = reinterpret_cast<const uint8_t*>(event.data());
  const uint8_t* end = p + event.size();
  while (p < end) {
    uint64_t tag = 0;
    if (!buffer::ReadVarInt(&p, end, &tag)) return 0;
    const uint64_t number = buffer::TagFieldNumber(tag);
    if (number == 0 || number > buffer::kMaxFieldNumber) return 0;
    switch (static_cast<WireType>(buffer::TagWireType(tag))) {
      case WireType::kVarInt: {
        uint64_t skipped;
        if (!buffer::ReadVarInt(&p, end, &skipped)) return 0;
        break;
      }
      case WireType::kFixed64:
      case WireType::kFixed32: {
        const ptrdiff_t size =
            static_cast<WireType>(buffer::TagWireType(tag)) == WireType::kFixed64 ? 8 : 4;
        if (end - p < size) return 0;
        p += size;
        break;
      }
      case WireType::kLengthDelimited: {
        uint64_t size = 0;
        if (!buffer::ReadVarInt(&p, end, &size) || size > static_cast<uint64_t>(end - p)) return 0;
        return static_cast<uint32_t>(number);
      }
      default:
        return 0;
    }
  }
  return 0;
}

}  // namespace

uint64_t CountEventsInPacket(absl::string_view packet) {
  uint64_t events = 0;
  CountEventsByKind(packet, [&](uint32_t, uint32_t, uint64_t n) { events += n; });
  return events;
}

void CountEventsByKind(
    absl::string_view packet,
    absl::FunctionRef<void(uint32_t cpu, uint32_t field, uint64_t n)> on_events) {
  // Events per kind of one bundle, in order of first appearance: a bundle
  // holds a few kinds, so a short list beats a map.
  absl::InlinedVector<std::pair<uint32_t, uint64_t>, 8> tally;
  auto add = [&](uint32_t field, uint64_t n) {
    if (n == 0) return;
    for (auto& [f, count] : tally) {
      if (f == field) {
        count += n;
        return;
      }
    }
    tally.emplace_back(field, n);
  };
  ForEachField(std::string_view(packet.data(), packet.size()), [&](const buffer::Field& f) {
    if (f.number != trace::TracePacket::kFtraceEventsFieldNumber ||
        f.type != WireType::kLengthDelimited)
      return;
    // One pass: the CPU may come after the events (it does not in ours), so
    // the bundle is reported once it is read.
    uint32_t cpu = 0;
    tally.clear();
    ForEachField(f.bytes, [&](const buffer::Field& b) {
      if (b.number == FtraceEventBundle::kCpuFieldNumber && b.type == WireType::kVarInt) {
        cpu = static_cast<uint32_t>(b.int_value);
      } else if (b.type != WireType::kLengthDelimited) {
        return;
      } else if (b.number == FtraceEventBundle::kEventFieldNumber) {
        add(PayloadField(b.bytes), 1);
      } else if (b.number == FtraceEventBundle::kCompactSchedFieldNumber) {
        ForEachField(b.bytes, [&](const buffer::Field& column) {
          if (column.type != WireType::kLengthDelimited) return;
          if (column.number == CompactSched::kSwitchTimestampFieldNumber) {
            add(FtraceEvent::kSchedSwitchFieldNumber, buffer::CountPackedVarInts(column.bytes));
          } else if (column.number == CompactSched::kWakingTimestampFieldNumber) {
            add(FtraceEvent::kSchedWakingFieldNumber, buffer::CountPackedVarInts(column.bytes));
          }
        });
      }
    });
    for (const auto& [field, n] : tally) on_events(cpu, field, n);
  });
}

}  // namespace ringside::agent
