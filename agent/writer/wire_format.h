#ifndef RINGSIDE_AGENT_WRITER_WIRE_FORMAT_H_
#define RINGSIDE_AGENT_WRITER_WIRE_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// Trace-specific wire-format helpers for packets assembled outside a
// TraceWriter: the Trace.packet framing, fields appended to a serialized
// packet (fields appended to a message merge into it), and reading what a
// packet holds. The primitives they build on are in buffer/wire_format.h.

// Appends Trace.packet framing (field 1, length-delimited) and `packet`.
void AppendFramedPacket(absl::string_view packet, std::string* out);
// Appends a varint field.
void AppendVarIntField(uint32_t field, uint64_t value, std::string* out);

// The kernel events a serialized TracePacket holds: the events of its
// ftrace_events bundle, including the compact sched_switch and sched_waking
// columns; 0 for any other packet. Reads untrusted bytes: malformed input
// counts what was readable and never reads past the end.
uint64_t CountEventsInPacket(absl::string_view packet);
// The same events by CPU and kind: calls `on_events(cpu, field, n)` for
// each run of `n` events of the bundle's CPU written as FtraceEvent field
// `field` (compact sched_switch as sched_switch's field, compact
// sched_waking as sched_waking's; an event with no payload as 0). The sum
// of every `n` is CountEventsInPacket().
void CountEventsByKind(absl::string_view packet,
                       absl::FunctionRef<void(uint32_t cpu, uint32_t field, uint64_t n)> on_events);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_WRITER_WIRE_FORMAT_H_
