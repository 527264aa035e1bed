#ifndef RINGSIDE_BASE_PRIVATE_DIRECTORY_H_
#define RINGSIDE_BASE_PRIVATE_DIRECTORY_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::base {

// The agent runs as root and creates files by name in some directories (the
// run directory's lock file, the control socket, output_dir's snapshots and
// streamed files, OutputDir): one that another user owns
// or can write could have names planted or swapped in it in advance (a hard
// link to someone else's file, a symlink). The check for such a directory,
// on the descriptor it was opened as (O_DIRECTORY | O_NOFOLLOW): owned by the
// agent's effective uid, and writable by neither its group nor others.
//
// `what` names it in the message ("the run directory /run/ringside"),
// `setting` says where to choose another ("--run-dir").
// Errors: kFailedPrecondition naming the owner or the mode; fstat's errno.
absl::Status CheckOnlyWeCanWrite(int dir_fd, absl::string_view what, absl::string_view setting);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_PRIVATE_DIRECTORY_H_
