#ifndef RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_
#define RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config/config_limits.h"
#include "google/protobuf/text_format.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Every check of a parsed config against what ringside and `machine` can
// do (sizes, sources, buffers, paths, triggers, filters). The first problem
// is an InvalidArgument error "file: line L, column C: <field path>
// <problem, and what is allowed>"; the line and column come from `tree`
// (null: a config changed after parsing, named by field only).
absl::Status CheckConfig(const config::TraceConfig& cfg, const MachineLimits& machine,
                         const std::string& file_name,
                         const google::protobuf::TextFormat::ParseInfoTree* tree);

// The checks of the config as it runs, the command line's settings merged
// into the file's: of fields that apply only together with one a flag can
// set (metrics_per_cpu with metrics_listen, which --metrics-listen sets).
// CheckConfig leaves them out, as a file alone cannot tell. The first
// problem is an InvalidArgument error "file: <field> <problem>".
absl::Status CheckEffectiveConfig(const config::TraceConfig& cfg, const std::string& file_name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_
