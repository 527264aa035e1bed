#ifndef RINGSIDE_AGENT_SESSION_PACKET_EVENTS_H_
#define RINGSIDE_AGENT_SESSION_PACKET_EVENTS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// What a serialized TracePacket holds, read without parsing it whole: the
// session's reader counts the kernel events of every packet it reads out of
// the buffers (the losses are what was committed and not read). The
// wire-format primitives are in buffer/wire_format.h, the framing in
// buffer/trace_packet.h.

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

#endif  // RINGSIDE_AGENT_SESSION_PACKET_EVENTS_H_
