#ifndef RINGSIDE_AGENT_CLI_INSPECT_COMMAND_H_
#define RINGSIDE_AGENT_CLI_INSPECT_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside inspect [--json] FILE`: summarizes a trace file. Exit status: 0;
// 1 when the file is empty, truncated or corrupt (after printing what was
// readable); 2 when it cannot be opened or for bad arguments.
const CommandSpec& InspectCommandSpec();
int RunInspectCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_INSPECT_COMMAND_H_
