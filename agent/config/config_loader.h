#ifndef RINGSIDE_AGENT_CONFIG_CONFIG_LOADER_H_
#define RINGSIDE_AGENT_CONFIG_CONFIG_LOADER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config_limits.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Parses a config in protobuf text format. Errors name the file, line and
// column, and what is wrong ("unknown field 'x'", a bad value, an unknown
// data source with the list of known ones, a target_buffer out of range).
// Returns the effective config: every default filled in (ApplyDefaults).
absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name);

// ParseConfig, against another machine's limits.
absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name,
                                                const MachineLimits& machine);
// kNotFound / kPermissionDenied / kInvalidArgument (a directory) naming
// why the file cannot be read.
absl::StatusOr<config::TraceConfig> LoadConfigFile(const std::string& path);

// The checks ParseConfig makes, for a config changed after parsing (by
// command-line flags), and those of the config as it runs
// (CheckEffectiveConfig): errors name the field, without a line.
absl::Status ValidateConfig(const config::TraceConfig& cfg, const std::string& file_name);

// The embedded default of `ringside record`: sched, process lifecycle and
// power events from ftrace into a 64 MiB ring, for 10 s.
config::TraceConfig DefaultRecordConfig();

// The embedded default of `ringside agent`: a flight recorder of the same
// events as record's default (scheduling, processes and incidents with BPF,
// ftrace's power events; ftrace in place of BPF where BPF cannot load) into
// a 64 MiB ring, without a duration, the durable store at 4 MiB, written
// only as snapshots: asked for, or fired by an OOM kill ("oom_kill") or a
// crash signal ("crash") one second after it, the newest 10 kept; its agent
// settings filled in (ApplyAgentDefaults).
config::TraceConfig DefaultAgentConfig();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_CONFIG_LOADER_H_
