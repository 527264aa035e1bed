#ifndef RINGSIDE_AGENT_INSPECT_COMMAND_H_
#define RINGSIDE_AGENT_INSPECT_COMMAND_H_

#include <string>
#include <vector>

namespace ringside::agent {

// `ringside inspect [--json] FILE`: prints a summary of a trace file.
// Exit status: 0 when the whole file was read, 1 when it is truncated or
// corrupt (what was readable is printed first), 2 when it cannot be opened or
// the arguments are wrong.
int RunInspectCommand(const std::vector<std::string>& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_INSPECT_COMMAND_H_
