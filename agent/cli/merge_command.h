#ifndef RINGSIDE_AGENT_CLI_MERGE_COMMAND_H_
#define RINGSIDE_AGENT_CLI_MERGE_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside merge -o OUT.tar FILE...`: trace files of several machines in
// one TAR that Perfetto's importer opens as one timeline, one machine per
// file's machine id, on REALTIME. Exit status: 0; 1 when a file cannot be
// read whole or placed (no REALTIME clock snapshot), or the archive cannot
// be written (nothing is left at OUT then, but for -o -, a pipe, which keeps
// what was written); 2 for bad arguments.
const CommandSpec& MergeCommandSpec();
int RunMergeCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_MERGE_COMMAND_H_
