#ifndef RINGSIDE_AGENT_CLI_RECORD_EVENTS_H_
#define RINGSIDE_AGENT_CLI_RECORD_EVENTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// `ringside record -e SPEC`: "group:name", "group/name", "group:*", each
// with an optional "/filter/", added to the config's linux.ftrace source
// (made if missing). An event the config's linux.bpf already records (one
// of its bpf_fallback_events) is left to BPF, and a filter on it refused.
// Sets `*event_out` to the event's tracefs path below events/
// ("group/name", "group/*").
absl::Status AddEvent(const std::string& spec, config::TraceConfig* cfg, std::string* event_out);

// Refuses an -e event (`specs[i]`, its path `events[i]`) this kernel does not
// have, before anything is recorded, as perf does. Without tracefs nothing
// can be checked: OK.
absl::Status CheckEventsExist(const std::vector<std::string>& specs,
                              const std::vector<std::string>& events);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_RECORD_EVENTS_H_
