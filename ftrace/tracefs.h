#ifndef RINGSIDE_FTRACE_TRACEFS_H_
#define RINGSIDE_FTRACE_TRACEFS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace ringside::ftrace {

// The tracefs mount. Touches only what event tracing needs: never the
// function-tracer files (set_ftrace_filter, ...) nor
// /proc/sys/kernel/ftrace_enabled, which some kernels and sandboxes refuse.
class Tracefs {
 public:
  // Finds tracefs at /sys/kernel/tracing or /sys/kernel/debug/tracing, and
  // mounts it at /sys/kernel/tracing if it is mounted nowhere and we may.
  // kUnavailable when the kernel has no tracefs; kPermissionDenied (naming
  // CAP_SYS_ADMIN / lockdown) when we may not use or mount it.
  static absl::StatusOr<Tracefs> Open();
  // For tests: tracefs at `root`, as is.
  static Tracefs AtRootForTesting(std::string root) { return Tracefs(std::move(root), false); }

  const std::string& root() const { return root_; }
  // True if Open() mounted it for the whole system (Unmount() then leaves
  // the system as found). A mount in this process's own mount namespace,
  // which Open() prefers, is not: it goes away with the process.
  bool mounted_by_us() const { return mounted_by_us_; }
  absl::Status Unmount();

  // Reads / writes a file below the root, with errors naming the file.
  absl::StatusOr<std::string> Read(const std::string& relative_path) const;
  absl::Status Write(const std::string& relative_path, const std::string& value) const;
  bool Exists(const std::string& relative_path) const;
  // The names of the events of `group` (events/<group>/*/); none if the
  // kernel has no such group.
  std::vector<std::string> GroupEvents(const std::string& group) const;

 private:
  Tracefs(std::string root, bool mounted_by_us)
      : root_(std::move(root)), mounted_by_us_(mounted_by_us) {}
  std::string root_;
  bool mounted_by_us_ = false;
};

// One kernel ring buffer of our own: instances/ringside-<name>-<id>, <id>
// 16 hex digits. Never the top-level buffer, so ringside coexists with
// trace-cmd, perf or another ringside. Removed (tracing off, directory gone)
// on destruction.
//
// Ownership must hold across PID and mount namespaces: a recorder in a
// container and one on the host share one tracefs, but not pids (both may
// be pid 1). So neither the name nor staleness uses a pid:
//
//  - Name: mkdir is atomic, so an EEXIST means another recorder has that
//    name and we draw another <id> (random, from getrandom). Unique
//    machine-wide whatever namespace each recorder is in.
//  - Owner alive: the owner holds flock(LOCK_EX) on an fd of the instance
//    directory for its whole life. tracefs is a single superblock behind
//    every mount of it, in any mount namespace, so everyone locks the same
//    inode. The lock goes with the owner's last fd, kill -9 included. The
//    fd is of the directory, not a file inside it: files opened in an
//    instance pin it (rmdir fails with EBUSY); a directory fd does not.
//    (Both checked on Linux 6.18, the lock across two tracefs mounts in
//    two mount namespaces.)
//  - Stale: RemoveStaleInstances takes LOCK_EX|LOCK_NB on each
//    ringside-*-<id>, and only if it gets it (nobody owns it) stops the
//    instance and removes it, still holding the lock.
//
// Races: Create locks right after mkdir; a stale check that slips into that
// gap locks and removes the new directory, so Create, once it holds the
// lock, checks that the path is still its directory (same inode) and draws
// a new name if not. The owner removes its directory before closing the
// lock fd, so no check sees an owned instance unlocked. The lock fd is
// O_CLOEXEC: a command ringside execs does not keep the instance alive, but
// a fork() that does not exec shares the lock for as long as it lives.
//
// Instances of ringsides before this scheme, ringside-<name>-<pid>, hold no
// lock, and their pid proves nothing from another namespace: they are left
// alone (never removed, never stopped) and reported as legacy.
class Instance {
 public:
  static constexpr char kPrefix[] = "ringside-";

  // Creates the instance, tracing off, first removing stale ones (see
  // RemoveStaleInstances). `name` is non-empty, without '/'.
  static absl::StatusOr<std::unique_ptr<Instance>> Create(const Tracefs& tracefs,
                                                          const std::string& name);
  // An instance that is not ours to make or remove (the kernel's
  // boot-mapped one, instances/<name> of `reserve_mem` and
  // `trace_instance=`), held with the same lock while we record into it, so
  // that two ringsides never share it. Never removed, nor stopped, by us on
  // destruction: the caller says what to leave it doing. kNotFound when it
  // does not exist; kUnavailable when another ringside holds it.
  static absl::StatusOr<std::unique_ptr<Instance>> Adopt(const Tracefs& tracefs,
                                                         const std::string& relative_path);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  struct StaleInstances {
    // Instances named ringside-*-<id> that nobody held: stopped and removed.
    std::vector<std::string> removed;
    // ringside-*-<pid> instances of older ringsides: left alone, for the
    // caller to mention (rmdir them by hand once no old ringside runs).
    std::vector<std::string> legacy;
  };
  // Removes every instances/ringside-*-<id> whose owner is gone (its lock is
  // free), from any namespace. Touches no other instance. Best effort: one
  // that cannot be removed (a reader still open somewhere) is only stopped.
  static StaleInstances RemoveStaleInstances(const Tracefs& tracefs);

  // What enabling a list of events did. Each event is "group/name" or
  // "group/*", optionally with a filter.
  struct EventSpec {
    std::string event;
    std::string filter;
  };
  struct EnableResult {
    std::vector<std::string> enabled;
    // Requested events this kernel does not have.
    std::vector<std::string> unknown;
    // Existing events that could not be enabled, with the reason (permission,
    // bad filter).
    std::vector<std::pair<std::string, absl::Status>> failed;
  };
  EnableResult EnableEvents(const std::vector<EventSpec>& events);
  absl::Status DisableAllEvents();

  // Each returns the value the kernel applied (it rounds sizes).
  absl::StatusOr<uint32_t> SetBufferSizeKb(uint32_t per_cpu_kb);
  absl::StatusOr<std::string> SetTraceClock(const std::string& clock);
  // The clock in use (trace_clock's bracketed one).
  absl::StatusOr<std::string> TraceClock() const;
  absl::Status SetTracingOn(bool on);
  // Discards what the buffers hold.
  absl::Status Clear();

  // Per-CPU ring buffer accounting, from per_cpu/cpuN/stats.
  struct CpuStats {
    uint64_t entries = 0;
    uint64_t overrun = 0;
    uint64_t commit_overrun = 0;
    uint64_t bytes = 0;
    double oldest_event_ts = 0;
    double now_ts = 0;
    uint64_t dropped_events = 0;
    uint64_t read_events = 0;
    // Every event the CPU's buffer lost: overwritten unread (overrun),
    // lost to a nested write that wrapped onto the page being committed
    // (commit overrun), or refused by a full buffer in no-overwrite mode
    // (dropped).
    uint64_t lost() const { return overrun + commit_overrun + dropped_events; }
  };
  absl::StatusOr<CpuStats> ReadCpuStats(int cpu) const;

  // Path below the tracefs root ("instances/ringside-x-0123456789abcdef").
  const std::string& relative_path() const { return relative_path_; }
  std::string path() const { return tracefs_.root() + "/" + relative_path_; }
  const Tracefs& tracefs() const { return tracefs_; }
  // Removes the instance now; the destructor does nothing afterwards.
  // FailedPrecondition for an adopted one.
  absl::Status Remove();
  bool adopted() const { return adopted_; }

 private:
  Instance(Tracefs tracefs, std::string relative_path, base::ScopedFd lock_fd)
      : tracefs_(std::move(tracefs)),
        relative_path_(std::move(relative_path)),
        lock_fd_(std::move(lock_fd)) {}
  absl::Status EnableOne(const std::string& group, const std::string& name,
                         const std::string& filter);

  Tracefs tracefs_;
  std::string relative_path_;
  // The instance directory, flock(LOCK_EX)ed while we own it; closed only
  // after the directory is gone (or in the destructor if it never went).
  base::ScopedFd lock_fd_;
  bool removed_ = false;
  bool adopted_ = false;
};

// Parses the text of per_cpu/cpuN/stats.
absl::StatusOr<Instance::CpuStats> ParseCpuStats(const std::string& text);

}  // namespace ringside::ftrace

#endif  // RINGSIDE_FTRACE_TRACEFS_H_
