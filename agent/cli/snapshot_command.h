#ifndef RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_
#define RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/cli/command_line.h"

namespace ringside::agent {

// `ringside snapshot [--reason TEXT] [--wait] [--timeout D] [--around TIME
// [--window D]] [--socket PATH] [-c CONFIG]`: asks the running agent for a
// snapshot of its buffers and prints the snapshot file's path. Exit status:
// 0; 1 when no agent answers, it refuses (a window its ring no longer
// holds), or the timeout passes; 2 for bad arguments (a reason that is not
// UTF-8 or too long, a TIME that is not one) or a config that cannot be
// read.
const CommandSpec& SnapshotCommandSpec();
int RunSnapshotCommand(const ParsedArgs& args);

// --around's TIME: RFC 3339 with a zone ("2026-11-27T10:15:00Z",
// "...T11:15:00.25+01:00"; a space for the 'T', as GNU `date --rfc-3339`
// writes it) or Unix seconds with up to nine decimals.
absl::StatusOr<absl::Time> ParseMoment(const std::string& text);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_SNAPSHOT_COMMAND_H_
