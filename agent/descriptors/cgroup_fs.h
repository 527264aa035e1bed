#ifndef RINGSIDE_AGENT_DESCRIPTORS_CGROUP_FS_H_
#define RINGSIDE_AGENT_DESCRIPTORS_CGROUP_FS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ringside::agent {

// The cgroup v2 hierarchy as this process sees it: where it is mounted, a
// process's cgroup, a cgroup's id, every cgroup. A cgroup is named by its
// path below the mount ("/system.slice/nginx.service"), as the `0::` line of
// /proc/PID/cgroup shows it; its id is its directory's inode number, the
// id BPF programs and the kernel's tracepoints report. Thread-safe.

// Where cgroup2 is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified beside
// v1 hierarchies (systemd's hybrid layout); empty when it is not. Read from
// /proc/self/mounts once: it does not move while the agent runs.
const std::string& Cgroup2Mount();

// The cgroup v2 path in the text of a /proc/PID/cgroup file: its `0::` line,
// without a trailing " (deleted)"; nullopt when there is no such line or its
// path does not start with '/'.
std::optional<std::string> CgroupPathInProcFile(std::string_view contents);
// The cgroup v2 path of process (or thread) `pid`; nullopt when it is gone or
// has none.
std::optional<std::string> CgroupPathOfPid(int32_t pid);

// Whether `path` has a ".." component (which would leave the hierarchy).
bool HasDotDot(std::string_view path);

// The id of the cgroup at `path` below Cgroup2Mount(); nullopt when there is
// no such cgroup, or `path` does not start with '/' or has a ".." component.
std::optional<uint64_t> CgroupIdOfPath(const std::string& path);

// Calls `visit` with the path and id of every cgroup, the root ("/") first,
// parents before their children, at most `max_cgroups` of them and none
// deeper than 64 levels. Cgroups made or removed meanwhile may be missed.
// Returns false when it stopped at `max_cgroups`.
bool ForEachCgroup(const std::function<void(const std::string& path, uint64_t id)>& visit,
                   size_t max_cgroups);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_CGROUP_FS_H_
