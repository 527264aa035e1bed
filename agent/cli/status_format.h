#ifndef RINGSIDE_AGENT_CLI_STATUS_FORMAT_H_
#define RINGSIDE_AGENT_CLI_STATUS_FORMAT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The version of StatusJson's schema (docs/status.md). Fields are only ever
// added; a change that removes or redefines one would raise it.
inline constexpr int kStatusJsonSchemaVersion = 1;

// `ringside status`: the agent's state for a person, in lines that fit 80
// columns with sizes in KiB/MiB/GiB. Ends with a newline.
std::string StatusText(const control::StatusReply& status);

// `ringside status --json`: every field of the reply under its proto name,
// present even when zero or empty (`streaming` is null when the agent does
// not stream, `metrics_listener` when it is not asked to listen), numbers as JSON numbers, enums by
// name, and "schema_version". docs/status.md describes each field.
nlohmann::json StatusJsonValue(const control::StatusReply& status);
// StatusJsonValue as text (JsonText: strings that are not UTF-8 get U+FFFD,
// never an exception).
std::string StatusJson(const control::StatusReply& status);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_STATUS_FORMAT_H_
