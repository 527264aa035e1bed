#ifndef RINGSIDE_AGENT_CLI_TRIGGER_COMMAND_H_
#define RINGSIDE_AGENT_CLI_TRIGGER_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside trigger NAME [--socket PATH] [-c CONFIG]`: fires the named
// trigger of the running agent's trigger_config, as a program that watches
// for trouble would. Exit status: 0 when the agent took it (a snapshot
// follows after the trigger's stop_delay_ms, or it joined one already
// pending); 1 when no agent answers or it refused (an unknown name, a rate
// limit: the agent's reason is printed); 2 for bad arguments.
const CommandSpec& TriggerCommandSpec();
int RunTriggerCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_TRIGGER_COMMAND_H_
