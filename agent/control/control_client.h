#ifndef RINGSIDE_AGENT_CONTROL_CONTROL_CLIENT_H_
#define RINGSIDE_AGENT_CONTROL_CONTROL_CLIENT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The largest reply CallAgent() accepts: far above any status of a real
// machine, small enough that a broken agent cannot make a client allocate
// without bound.
inline constexpr uint32_t kMaxReplyBytes = 16 << 20;

// Sends `request` to the agent listening on `socket_path` and returns its
// reply, all within `timeout`. A reply whose `error` is set (the agent
// refused or could not do it: "permission denied: ...", "malformed
// request ...") is returned as is: it is the agent's answer.
// Errors, each naming the path:
//   kUnavailable       no agent listens there (no such file, nobody
//                      accepting), or it closed the connection before
//                      answering;
//   kPermissionDenied  the socket's mode does not let this user connect;
//   kDeadlineExceeded  no whole reply within `timeout`;
//   kDataLoss          a reply larger than kMaxReplyBytes, or one that does
//                      not parse;
//   kInvalidArgument   a path too long for a unix socket.
absl::StatusOr<control::Reply> CallAgent(const std::string& socket_path,
                                         const control::Request& request, absl::Duration timeout);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONTROL_CONTROL_CLIENT_H_
