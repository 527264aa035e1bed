#ifndef RINGSIDE_AGENT_TRACEFILE_SHARED_EVENTS_H_
#define RINGSIDE_AGENT_TRACEFILE_SHARED_EVENTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringside::agent {

// The kernel events two trace files of one machine (one boot) both hold:
// the same event (CPU, kind, pid, CLOCK_BOOTTIME timestamp) in each, with
// its timestamp in [from_ns, to_ns]. A snapshot and the file streamed over
// the same minutes share their events; consecutive rotated files of one
// stream share none, although their time ranges interleave (each CPU's
// events are cut at a different moment, so one file's last event can come
// after the next file's first).
//
// Reads both files whole (the first one's events in the window are held,
// up to kMaxHeldEvents, 24 bytes each). Fails only when a file cannot be
// opened; a corrupt one is compared up to where it breaks.
inline constexpr uint64_t kMaxHeldEvents = uint64_t{1} << 20;
absl::StatusOr<uint64_t> CountSharedKernelEvents(const std::string& a, const std::string& b,
                                                 uint64_t from_ns, uint64_t to_ns);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_SHARED_EVENTS_H_
