#ifndef RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_
#define RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside snapshot [--reason TEXT] [--wait] [--timeout D] [--socket PATH]
// [-c CONFIG]`: asks the running agent for a snapshot of its buffers and
// prints the snapshot file's path. Exit status: 0; 1 when no agent answers,
// it refuses, or the timeout passes; 2 for bad arguments (a reason that is
// not UTF-8 or too long) or a config that cannot be read.
const CommandSpec& SnapshotCommandSpec();
int RunSnapshotCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_
