#ifndef RINGSIDE_AGENT_CONFIG_LOADER_H_
#define RINGSIDE_AGENT_CONFIG_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Data sources this build can run.
const std::vector<std::string>& KnownDataSources();

// flush_period_ms of a write_into_file config that does not set it.
inline constexpr uint32_t kDefaultStreamingFlushPeriodMs = 1000;

// Parses a config in protobuf text format. Errors name the file, line and
// column, and what is wrong ("unknown field 'x'", a bad value, an unknown
// data source with the list of known ones, a target_buffer out of range).
// Returns the effective config: defaults that depend on other fields filled
// in (flush_period_ms when streaming).
absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name);
absl::StatusOr<config::TraceConfig> LoadConfigFile(const std::string& path);

// The embedded default of `ringside record`: sched, process lifecycle and
// power events from ftrace into a 64 MiB ring, for 10 s.
config::TraceConfig DefaultRecordConfig();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_LOADER_H_
