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
// The cgroup v2 path of process (or thread) `pid` below Cgroup2Mount()
// (CgroupPathBelowMount); nullopt when it is gone or has none.
std::optional<std::string> CgroupPathOfPid(int32_t pid);

// A /proc/PID/cgroup path (CgroupPathInProcFile) as a path below
// Cgroup2Mount(). The two differ when this process has a cgroup namespace
// of its own (a container's, by default under cgroup v2) while its cgroup2
// mount shows the node's whole hierarchy (a hostPath of /sys/fs/cgroup):
// the kernel then names cgroups relative to the namespace's root, others'
// as "/../../kubepods.slice/...", and this process's own as "/". Such a
// path is joined to the root's path below the mount (CgroupNamespaceRoot)
// and its ".." resolved. Unchanged when the namespace is the node's, or its
// root cannot be found below the mount (a mount of the namespace's own:
// cgroups outside it cannot be named there).
std::string CgroupPathBelowMount(std::string_view ns_path);
// CgroupPathBelowMount() with the namespace's root given: `root` +
// `ns_path`, its ".." components resolved (never above "/").
std::string JoinCgroupPath(std::string_view root, std::string_view ns_path);

// The root of this process's cgroup namespace below Cgroup2Mount(), found
// once: "/" when the namespace is the node's (pid 1, the node's init with
// the node's pids, is inside it); nullopt when it is not and its root is
// not below the mount. Found as the cgroup that lists this process, at
// least as deep as pid 1's path climbs ("/../../.." climbs 3 levels), among
// at most kMaxCgroupsSearched.
const std::optional<std::string>& CgroupNamespaceRoot();
inline constexpr size_t kMaxCgroupsSearched = 65536;

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
