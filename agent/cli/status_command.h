#ifndef RINGSIDE_AGENT_CLI_STATUS_COMMAND_H_
#define RINGSIDE_AGENT_CLI_STATUS_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside status [--json] [--socket PATH] [-c CONFIG]`: what a running
// agent is doing (sources, buffers, losses, snapshots, its own cost). Exit
// status: 0; 1 when no agent answers (or it refuses); 2 for bad arguments
// or a config that cannot be read.
const CommandSpec& StatusCommandSpec();
int RunStatusCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_STATUS_COMMAND_H_
