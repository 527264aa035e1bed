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
  ForEachField(std::string_view(packet.data(), packet.size()), [&](const buffer::Field& f) {
    if (f.number != kPacketFtraceEvents || f.type != WireType::kLengthDelimited) return;
    ForEachField(f.bytes, [&](const buffer::Field& b) {
      if (b.type != WireType::kLengthDelimited) return;
      if (b.number == kBundleEvent) {
        events++;
      } else if (b.number == kBundleCompactSched) {
        ForEachField(b.bytes, [&](const buffer::Field& column) {
          if (column.type == WireType::kLengthDelimited &&
              (column.number == kCompactSwitchTimestamp ||
               column.number == kCompactWakingTimestamp)) {
            events += buffer::CountPackedVarInts(column.bytes);
          }
        });
      }
    });
  });
  return events;
}

}  // namespace ringside::agent
