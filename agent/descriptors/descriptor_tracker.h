#ifndef RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
#define RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
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
// Thread-safe: data source threads report events; the updates wait in a
// queue until the buffer's owner applies them (ApplyTo), as the store, like
// the ring, has a single owner.
class DescriptorTracker {
 public:
  DescriptorTracker() = default;

  // Everything in a ProcessTree packet (a /proc scan taken after the
  // sources started), except tasks whose exit was already reported.
  void Seed(const trace::TracePacket& process_tree);

  void OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid, int32_t child_tid,
              int32_t child_tgid, std::string_view child_comm);
  // ftrace's task_newtask: the parent is the current task; a thread when
  // clone_flags has CLONE_THREAD.
  void OnNewTask(uint64_t ts, int32_t parent_tid, int32_t child_tid, std::string_view comm,
                 uint64_t clone_flags);
  // `argv`: NUL-separated arguments (may be empty: then the filename).
  // `tgid`/`ppid`/`uid` < 0: unknown (ftrace), taken from what is known.
  void OnExec(uint64_t ts, int32_t tid, int32_t tgid, std::string_view filename,
              std::string_view argv, std::string_view comm, int32_t ppid, int64_t uid);
  // `group_dead` < 0: unknown; then the leader's exit ends the process.
  void OnExit(uint64_t ts, int32_t tid, int32_t tgid, int group_dead);
  void OnRename(uint64_t ts, int32_t tid, std::string_view new_comm);

  // Moves the updates reported so far into `store` (the buffer owner's).
  void ApplyTo(buffer::DurableStore* store);
  size_t live_processes() const;

 private:
  struct Process {
    int32_t ppid = 0;
    int64_t uid = -1;
    std::vector<std::string> cmdline;
  };
  struct Thread {
    int32_t tgid = 0;
    std::string name;
  };
  void PutProcess(uint64_t ts, int32_t pid, const Process& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutThread(uint64_t ts, int32_t tid, const Thread& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t TgidOf(int32_t tid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Update {
    buffer::DurableStore::Kind kind;
    uint64_t id;
    bool ended;  // Else: put `packet`.
    std::string packet;
  };
  mutable absl::Mutex mu_;
  std::vector<Update> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, Process> processes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, Thread> threads_ ABSL_GUARDED_BY(mu_);
  // Until Seed(): tids whose exit was reported, so the scan cannot revive them.
  bool seeded_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<int32_t> ended_before_seed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
