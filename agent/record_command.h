#ifndef RINGSIDE_AGENT_RECORD_COMMAND_H_
#define RINGSIDE_AGENT_RECORD_COMMAND_H_

#include <string>
#include <vector>

namespace ringside::agent {

// `ringside record [-c config.pbtxt] [-o out.pftrace] [--duration 10s] [-- CMD ARGS...]`:
// records this machine into a trace file. With CMD, records while CMD runs
// and exits with CMD's exit code. Ctrl-C / SIGTERM stop early and still write
// a complete file. Exit status: 0 (or CMD's), 1 when the file could not be
// written, 2 for a bad config or arguments.
int RunRecordCommand(const std::vector<std::string>& args);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_RECORD_COMMAND_H_
