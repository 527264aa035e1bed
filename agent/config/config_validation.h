#ifndef RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_
#define RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config/config_loader.h"
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

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_CONFIG_VALIDATION_H_
