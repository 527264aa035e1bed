#ifndef RINGSIDE_TESTS_AGENT_TESTING_AGENT_PROCESS_H_
#define RINGSIDE_TESTS_AGENT_TESTING_AGENT_PROCESS_H_

#include <sys/types.h>

#include <cstdint>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ringside/control/control.pb.h"
#include "tests/agent/testing/degradation.h"

namespace ringside::agent::testing {

// A unix datagram socket standing in for systemd's NOTIFY_SOCKET.
class FakeNotifySocket {
 public:
  explicit FakeNotifySocket(const std::string& path);
  ~FakeNotifySocket();
  const std::string& path() const { return path_; }
  // The next datagram, or an empty string after `timeout`.
  std::string Receive(absl::Duration timeout);
  // Datagrams until one contains `line` (a whole line, e.g. "READY=1");
  // returns all received, the matching one last; empty if none within
  // `timeout`, or, when `until` is given, as soon as it returns true.
  std::vector<std::string> ReceiveUntil(const std::string& line, absl::Duration timeout,
                                        const std::function<bool()>& until = nullptr);

 private:
  std::string path_;
  int fd_ = -1;
};

// A small disk of the agent's own: a tmpfs mounted on `dir` in a mount
// namespace only the agent is in, so a test can fill it without filling the
// machine's, and nothing stays mounted once the agent is gone (the
// namespace dies with it).
struct PrivateTmpfs {
  std::string dir;  // Must exist.
  uint64_t size_bytes = 0;
};

// `ringside agent ARGS...` started by the test, stderr into `log_path`,
// NOTIFY_SOCKET set to `notify_socket` (if not empty). Killed (SIGKILL) by
// the destructor if still running.
class AgentProcess {
 public:
  // `env`: more NAME=value settings for the agent. `tmpfs`: run it in a
  // mount namespace of its own with that tmpfs (needs CAP_SYS_ADMIN; the
  // agent exits 124 with a line on its log when it cannot be set up).
  // `degradation`: what it runs without (ApplyInChild(); the agent exits
  // 101-104 when that cannot be set up).
  AgentProcess(const std::vector<std::string>& args, const std::string& log_path,
               const std::string& notify_socket, const std::vector<std::string>& env = {},
               const std::optional<PrivateTmpfs>& tmpfs = std::nullopt,
               const Degradation& degradation = {});
  ~AgentProcess();
  pid_t pid() const { return pid_; }
  // `path` as the agent sees it, for the test to reach into its tmpfs
  // (through /proc/PID/root).
  std::string SeenByAgent(const std::string& path) const;
  bool Signal(int sig);
  // The wait status once it exited, within `timeout`; nullopt if it did not.
  std::optional<int> WaitExit(absl::Duration timeout);
  // What it wrote on stderr so far.
  std::string Log() const;
  // True once it exited (reaped by WaitExit, or a zombie still to reap).
  bool Exited() const;
  // Waits for READY=1 on `notify`: OK once it came; an error as soon as the
  // agent exited without it (its exit status), or after `timeout` (each of
  // its threads' state, wait channel and kernel stack, so that a start stuck
  // in the kernel says where).
  absl::Status WaitReady(FakeNotifySocket* notify, absl::Duration timeout);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// Each thread of process `pid`: its name, state, wait channel and kernel
// stack, for the message of a test that found it stuck.
std::string ThreadsOf(pid_t pid);

// One request to the agent on `socket`.
absl::StatusOr<control::Reply> Ask(const std::string& socket, const control::Request& request,
                                   absl::Duration timeout = absl::Seconds(30));
control::Request StatusRequest();
control::Request SnapshotRequest(const std::string& reason, bool wait);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_AGENT_PROCESS_H_
