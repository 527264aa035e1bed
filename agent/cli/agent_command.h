#ifndef RINGSIDE_AGENT_CLI_AGENT_COMMAND_H_
#define RINGSIDE_AGENT_CLI_AGENT_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside agent`: the node daemon (agent/daemon/agent_service.h).
const CommandSpec& AgentCommandSpec();
int RunAgentCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_AGENT_COMMAND_H_
