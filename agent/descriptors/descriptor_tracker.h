#ifndef RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
#define RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "buffer/durable_store.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// Keeps a descriptor (a ProcessTree packet naming it) of every process and
// thread in the DurableStore beside a ring, so that every pid in the ring
// resolves to a name however often the ring wrapped. Seeded from a /proc
// scan, then kept up to date from fork/exec/exit/rename events — the BPF
// process source, or ftrace's task_newtask/sched_process_exec/exit and
// task_rename.
//
// A process's cgroup v2 (SetCgroupOfProcess) comes from the scan, from its
// exec (the id BPF reports, or none from ftrace; the path read from
// /proc/PID/cgroup while the process lives, and remembered per id), and
// from its parent at fork. A process that moves to another cgroup without
// an exec keeps the cgroup it had.
//
// Thread-safe: data source threads report events; the updates wait in a
// queue until the buffer's owner applies them (ApplyTo), as the store, like
// the ring, has a single owner.
class DescriptorTracker {
 public:
  // How a process's cgroup is found (cgroup_fs.h's functions; tests fake
  // them): its path by pid, the id of a path.
  struct CgroupLookup {
    std::function<std::optional<std::string>(int32_t pid)> path_of_pid;
    std::function<std::optional<uint64_t>(const std::string& path)> id_of_path;
  };
  // Paths of this many cgroup ids are remembered (a bounded cache: a
  // forgotten one is read from /proc again).
  static constexpr size_t kMaxRememberedCgroups = 4096;

  DescriptorTracker();
  explicit DescriptorTracker(CgroupLookup lookup);

  // Everything in a ProcessTree packet (a /proc scan taken after the
  // sources started), except tasks whose exit was already reported.
  void Seed(const trace::TracePacket& process_tree);

  // Records are read per CPU, so a child's exec or rename may arrive before
  // its fork: the fork does not undo what a later event said.
  void OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid, int32_t child_tid,
              int32_t child_tgid, std::string_view child_comm);
  // ftrace's task_newtask: the parent is the current task; a thread when
  // clone_flags has CLONE_THREAD.
  void OnNewTask(uint64_t ts, int32_t parent_tid, int32_t child_tid, std::string_view comm,
                 uint64_t clone_flags);
  // `argv`: NUL-separated arguments (may be empty: then the filename).
  // `tgid`/`ppid`/`uid` < 0: unknown (ftrace), taken from what is known.
  // `cgroup_id`: the task's cgroup v2 id at exec (BPF); 0: unknown (ftrace),
  // then found from its path. Reads /proc/<tid>/cgroup unless the id's path
  // is remembered; a process already gone keeps its id alone.
  void OnExec(uint64_t ts, int32_t tid, int32_t tgid, std::string_view filename,
              std::string_view argv, std::string_view comm, int32_t ppid, int64_t uid,
              uint64_t cgroup_id = 0);
  // `group_dead` < 0: unknown; then the leader's exit ends the process.
  void OnExit(uint64_t ts, int32_t tid, int32_t tgid, int group_dead);
  void OnRename(uint64_t ts, int32_t tid, std::string_view new_comm);

  // Moves the updates reported so far into `store` (the buffer owner's).
  void ApplyTo(buffer::DurableStore* store);
  size_t live_processes() const;
  size_t remembered_cgroups_for_testing() const;

 private:
  struct Process {
    int32_t ppid = 0;
    int64_t uid = -1;
    std::vector<std::string> cmdline;
    uint64_t cgroup_id = 0;   // 0: unknown.
    std::string cgroup_path;  // Empty: unknown.
    uint64_t ts = 0;          // Of the event (or scan) that last described it.
  };
  struct Thread {
    int32_t tgid = 0;
    std::string name;
    uint64_t ts = 0;
  };
  void PutProcess(uint64_t ts, int32_t pid, const Process& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutThread(uint64_t ts, int32_t tid, const Thread& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t TgidOf(int32_t tid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberCgroup(uint64_t id, const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cgroup of `tid` at its exec, `cgroup_id` as reported (0: unknown).
  // Takes mu_ only to read and update the remembered paths: /proc is read
  // without it.
  std::pair<uint64_t, std::string> CgroupAtExec(int32_t tid, uint64_t cgroup_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  struct Update {
    buffer::DurableStore::Kind kind;
    uint64_t id;
    bool ended;  // Else: put `packet`.
    std::string packet;
  };
  CgroupLookup cgroup_lookup_;  // Set once, in the constructor.
  mutable absl::Mutex mu_;
  // cgroup id -> path, at most kMaxRememberedCgroups.
  absl::flat_hash_map<uint64_t, std::string> cgroup_paths_ ABSL_GUARDED_BY(mu_);
  std::vector<Update> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, Process> processes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, Thread> threads_ ABSL_GUARDED_BY(mu_);
  // Until Seed(): tids whose exit was reported, so the scan cannot revive them.
  bool seeded_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<int32_t> ended_before_seed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
