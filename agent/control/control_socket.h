#ifndef RINGSIDE_AGENT_CONTROL_CONTROL_SOCKET_H_
#define RINGSIDE_AGENT_CONTROL_CONTROL_SOCKET_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// The control socket's file, made safe for a root agent: its directory is
// opened once (O_NOFOLLOW) and refused unless only the agent's user can
// write it (CheckOnlyWeCanWrite); everything after is relative to that
// descriptor, so a path swapped above it changes nothing.
struct ControlSocket {
  base::ScopedFd fd;      // Listening, non-blocking.
  base::ScopedFd dir_fd;  // The checked directory.
  std::string name;       // The socket file's name in it.
  dev_t dev = 0;          // The file, to remove only this one at the end.
  ino_t ino = 0;
};

// Creates the listening socket at `path`, mode 0660 and group `group` set
// without following a path. A socket found at `path` is replaced only with
// `replace_stale_socket` (the caller's lock says no agent owns it); nothing
// else there is ever replaced. `after_bind` (tests) runs right after bind().
// Errors: kInvalidArgument for a path too long for a unix socket or that
// names no file; kFailedPrecondition for a directory others can change or
// a non-socket at `path`; kAlreadyExists for a socket there; kNotFound when
// its directory does not exist; others naming the path and errno.
absl::StatusOr<ControlSocket> CreateControlSocket(const std::string& path,
                                                  std::optional<gid_t> group,
                                                  bool replace_stale_socket,
                                                  const std::function<void()>& after_bind);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONTROL_CONTROL_SOCKET_H_
