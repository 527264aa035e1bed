#ifndef RINGSIDE_AGENT_CLI_RECORD_COMMAND_H_
#define RINGSIDE_AGENT_CLI_RECORD_COMMAND_H_

#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside record [-c config.pbtxt] [-o out.pftrace] [--duration 10s]
// [-e group:name[/filter/]]... [-b size] [-- CMD ARGS...]`: records this
// machine into a trace file. With CMD, records while CMD runs and exits
// with CMD's exit status (128 + signal if a signal ended it; 127 / 126 and
// no trace when CMD cannot be run). Ctrl-C, SIGTERM and SIGHUP stop early,
// are passed on to CMD (whose fate is then the exit status; a second one,
// or 10 s, kills a CMD that goes on) and still write a complete file. Exit
// status otherwise (no CMD, or the duration ended first): 0, 1 when the
// file could not be written, 2 for bad arguments or config.
const CommandSpec& RecordCommandSpec();
int RunRecordCommand(const ParsedArgs& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_RECORD_COMMAND_H_
