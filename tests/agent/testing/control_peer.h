#ifndef RINGSIDE_TESTS_AGENT_TESTING_CONTROL_PEER_H_
#define RINGSIDE_TESTS_AGENT_TESTING_CONTROL_PEER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent::testing {

// A directory of the test's own under /tmp, searchable by every user (so
// that an unprivileged child can reach a socket in it); removed with its
// contents by the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A control-socket client that sends whatever bytes a test wants, for the
// cases CallAgent() never produces (garbage, half frames, pipelining).
class RawClient {
 public:
  // Blocking connect; -1 fd (and ok() false) when it fails.
  explicit RawClient(const std::string& socket_path);
  ~RawClient();
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  bool Send(const std::string& bytes);
  bool Send(const control::Request& request);
  // The next reply frame, within `timeout`.
  absl::StatusOr<control::Reply> ReadReply(absl::Duration timeout = absl::Seconds(10));
  // True when the server closed the connection (EOF or reset) within
  // `timeout`, reading and discarding anything it sent first.
  bool ClosedByServer(absl::Duration timeout);

 private:
  int fd_ = -1;
};

// Runs `body` on a thread of its own that has dropped to `uid`, `gid` and
// the supplementary `groups` (the rest of the process keeps its
// credentials), and returns what `body` returned, or an error if the drop
// failed. What `body` connects to sees those credentials (SO_PEERCRED,
// SO_PEERGROUPS, the socket file's permissions).
absl::StatusOr<std::string> RunAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                                  const std::function<std::string()>& body);

// Connects to `socket_path`, sends `bytes`, and returns all the server sends
// until it closes, one whole frame is in, or 5 s pass; "connect: <errno name>" when it cannot
// connect.
std::string ExchangeRaw(const std::string& socket_path, const std::string& bytes);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_CONTROL_PEER_H_
