#ifndef RINGSIDE_AGENT_DAEMON_INTERNAL_REPLIES_H_
#define RINGSIDE_AGENT_DAEMON_INTERNAL_REPLIES_H_

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/control/control_server.h"
#include "ringside/control/control.pb.h"

// The control replies AgentService builds, shared by the files it is
// written in.
namespace ringside::agent::internal {

// "uid U pid P", for the log.
inline std::string Who(const Peer& peer) {
  return absl::StrCat("uid ", peer.uid, " pid ", peer.pid);
}

inline control::Reply Error(std::string message) {
  control::Reply reply;
  reply.set_error(std::move(message));
  return reply;
}

inline control::Reply SnapshotReply(const std::string& path, const std::string& reason) {
  control::Reply reply;
  reply.mutable_snapshot()->set_path(path);
  reply.mutable_snapshot()->set_reason(reason);
  return reply;
}

}  // namespace ringside::agent::internal

#endif  // RINGSIDE_AGENT_DAEMON_INTERNAL_REPLIES_H_
