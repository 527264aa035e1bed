#ifndef RINGSIDE_AGENT_LIFECYCLE_AGENT_LOCK_H_
#define RINGSIDE_AGENT_LIFECYCLE_AGENT_LOCK_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// One agent per machine: an flock(2) on `<run_dir>/agent.lock`, held for the
// agent's lifetime. The kernel drops the flock when the holder dies however it
// dies, so a lock file left behind by a killed agent is taken over, never an
// error; while the lock is held, the file says who holds it:
//
//   pid 1234\n
//   socket /run/ringside/control.sock\n
//
// so that a second agent can name the running one, and the next agent knows
// which control socket a dead one left behind.
//
// Thread-safety: an AgentLock is not shared; create and destroy it on one
// thread. Forked children (without exec) share the flock with the parent.
class AgentLock {
 public:
  // Who holds (or held) the lock, as its file says.
  struct Holder {
    pid_t pid = 0;
    // The holder's control socket; empty when the file names none.
    std::string socket;
  };

  // Takes the lock, creating `run_dir` (mode 0755, one level only) when it
  // is missing, and writes our pid and `socket_path` into the lock file.
  // Never follows a symlink, neither for `run_dir` nor for the lock file.
  // Errors: kAlreadyExists "another ringside agent is running: pid N,
  // control socket P (lock file F)" when the lock is held;
  // kFailedPrecondition naming the path and what it is when `run_dir` or
  // the lock file is not a directory / regular file (a symlink, a device...),
  // which is left untouched; kInvalidArgument when `socket_path` contains a
  // newline; kNotFound when the parent of `run_dir` does not exist; others
  // naming the path and the system call's error.
  static absl::StatusOr<std::unique_ptr<AgentLock>> Acquire(const std::string& run_dir,
                                                            const std::string& socket_path);
  // Acquire(), calling `after_open` between opening the lock file and
  // locking it, to reproduce an exiting agent's unlink racing our open.
  static absl::StatusOr<std::unique_ptr<AgentLock>> AcquireForTesting(
      const std::string& run_dir, const std::string& socket_path,
      const std::function<void()>& after_open);

  // Removes the lock file if it is still ours (same device and inode as the
  // file we hold), then releases the lock.
  ~AgentLock();
  AgentLock(const AgentLock&) = delete;
  AgentLock& operator=(const AgentLock&) = delete;

  // What the lock file said before we took it, when an agent that is gone
  // left it behind (it died without cleaning up, e.g. kill -9): the caller
  // may then replace that agent's stale socket
  // (ControlServer::Options::replace_stale_socket). nullopt when the file
  // was new, empty, or did not name a pid.
  const std::optional<Holder>& stale_holder() const { return stale_holder_; }
  // `<run_dir>/agent.lock`.
  const std::string& path() const { return path_; }

 private:
  AgentLock() = default;
  static absl::StatusOr<std::unique_ptr<AgentLock>> Take(const std::string& run_dir,
                                                         const std::string& socket_path,
                                                         const std::function<void()>& after_open);

  std::string path_;
  base::ScopedFd dir_fd_;  // The run directory, where the lock file is.
  base::ScopedFd fd_;      // The lock file, flock'ed; none until taken.
  std::optional<Holder> stale_holder_;
};

// The holder named by the lock file at `lock_path` (for messages and tests).
// Errors: kNotFound when there is no file or it is empty; kDataLoss when it
// does not name a pid; kFailedPrecondition when it is not a regular file;
// others naming the path and the system call's error.
absl::StatusOr<AgentLock::Holder> ReadLockHolder(const std::string& lock_path);

// Parses lock file contents ("pid N\nsocket P\n"); untrusted bytes. nullopt
// unless a positive pid is named.
std::optional<AgentLock::Holder> ParseLockHolder(absl::string_view contents);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_LIFECYCLE_AGENT_LOCK_H_
