#ifndef RINGSIDE_AGENT_CLI_STOP_COMMAND_H_
#define RINGSIDE_AGENT_CLI_STOP_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside stop [--wait] [--timeout D] [--socket PATH] [-c CONFIG]`: asks
// the running agent to shut down as SIGTERM does; with --wait, returns once
// it no longer answers. Exit status: 0; 1 when no agent answers, it
// refuses, or (--wait) it still answers after the timeout; 2 for bad
// arguments or a config that cannot be read.
const CommandSpec& StopCommandSpec();
int RunStopCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_STOP_COMMAND_H_
