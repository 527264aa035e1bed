#ifndef RINGSIDE_AGENT_CLI_RECORD_CHILD_H_
#define RINGSIDE_AGENT_CLI_RECORD_CHILD_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringside::agent {

// `record -- CMD`: the command a recording runs beside it, as a child
// process. Checked before anything is opened or loaded (CheckCommand), started
// once the recording is (SpawnCommand), and stopped when the recording ends
// first (StopCommand); its end is described for the closing line
// (DescribeExit).

// How long a CMD the recording stops has to end before it is killed.
inline constexpr absl::Duration kCommandGraceTime = absl::Seconds(10);

// The executable `cmd` names, looked up as execvp() would: 127 if there is
// none, 126 if it cannot be run (`*why` says which, as a shell would: "command
// not found", "is a directory", "permission denied"); 0 if it can.
int CheckCommand(const std::string& cmd, std::string* why);

// Starts `args` as a child process (its executable looked up in PATH) with
// the default signal mask and SIGPIPE's default action. Returns its pid, or
// -1 with `*exec_errno` set when it could not be started (its errno, or the
// exec's). Safe with other threads running; the child never holds a copy of
// the recording's memory (no page of ours becomes copy-on-write).
pid_t SpawnCommand(const std::vector<std::string>& args, int* exec_errno);

// Ends the child `pid` (`name` in the message) that the recording outlived:
// sends it `sig`. A child that ignores it (nohup, a trap) must not hold the
// file back: a second stop signal (SIGINT, SIGTERM or SIGHUP taken from
// `signals` meanwhile), or `grace` passing, kills it, which stderr says (on a
// new line when `tty`). Returns its wait status, as waitpid() gives it.
// REQUIRES: `signals` blocked in this thread (the stop signals and
// SIGCHLD), so that sigtimedwait() takes them.
int StopCommand(pid_t pid, const std::string& name, int sig, const sigset_t& signals,
                absl::Duration grace, bool tty);

// A child's end for the closing line, from its wait status: "command exited
// with status N", "command killed by signal N (Killed)", else "command ended".
std::string DescribeExit(int status);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_RECORD_CHILD_H_
