#ifndef RINGSIDE_AGENT_LIFECYCLE_OPEN_FILE_LIMIT_H_
#define RINGSIDE_AGENT_LIFECYCLE_OPEN_FILE_LIMIT_H_

#include <sys/resource.h>

namespace ringside::agent {

// The most open files the agent asks for.
inline constexpr rlim_t kAgentOpenFiles = 65536;

// Raises this process's soft limit of open files (RLIMIT_NOFILE) to its
// hard limit, up to kAgentOpenFiles; never lowers it, and needs no
// privilege. systemd starts a service with a soft limit of 1024 (its hard
// one is 524288) so that programs using select() keep their descriptors
// under FD_SETSIZE, and asks programs that do not use select() to raise
// it themselves: the agent uses epoll and poll only. linux.process_stats
// keeps each process's statm open from poll to poll for a quarter of the
// limit: 256 processes under 1024, fewer than a Kubernetes node runs.
// Only for `ringside agent`: `record -- CMD` would hand the raised limit
// to the command. Returns the soft limit now in force (0 when unknown).
rlim_t RaiseOpenFileLimit();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_LIFECYCLE_OPEN_FILE_LIMIT_H_
