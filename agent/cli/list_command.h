#ifndef RINGSIDE_AGENT_CLI_LIST_COMMAND_H_
#define RINGSIDE_AGENT_CLI_LIST_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside list [-v] [PATTERN]`: the events ringside can record: its BPF
// programs with what they emit, and this kernel's ftrace events (with their
// fields under -v). PATTERN is a glob over "group:name" (e.g. 'sched:*').
const CommandSpec& ListCommandSpec();
int RunListCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_LIST_COMMAND_H_
