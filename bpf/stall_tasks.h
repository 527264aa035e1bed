#ifndef RINGSIDE_BPF_STALL_TASKS_H_
#define RINGSIDE_BPF_STALL_TASKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bpf/incident_events.h"

struct bpf_map;

namespace ringside::bpf {

// The scheduling group's stall_tasks map (bpf/stalls.bpf.h), read by the
// agent's sweep for tasks blocked in D that never woke: the programs
// report a block only as it ends.
class StallTasks {
 public:
  StallTasks() = default;  // Stalls not measured.
  // `map`: HASH tid -> rs_stall_task; `full`: the programs' count of tasks
  // that found it full. Both the loaded object's, valid while it lives.
  // `blocked_ns`: the threshold the programs were loaded with (0: blocks
  // not measured); `runqueue_refused`: why run-queue delays asked for are
  // not measured (PlaceRunqueueDelays), or empty.
  StallTasks(const bpf_map* map, const __u64* full, uint64_t blocked_ns,
             std::string runqueue_refused)
      : map_(map),
        full_(full),
        blocked_ns_(blocked_ns),
        runqueue_refused_(std::move(runqueue_refused)) {}

  uint64_t blocked_ns() const { return blocked_ns_; }
  const std::string& runqueue_refused() const { return runqueue_refused_; }

  struct Blocked {
    int32_t tid;
    rs_stall_task task;
  };
  // The tasks off the CPU in D since blocked_ns or more before `now_ns`
  // (CLOCK_BOOTTIME), read in batches of entries (one system call each, on
  // 5.6+), else one by one. Empty when blocks are not measured.
  std::vector<Blocked> BlockedSince(uint64_t now_ns) const;

  // Drops the entry of `tid` if it still says blocked since `since_ns`: a
  // block the sweep found over (its wakeup missed by the programs).
  void Forget(int32_t tid, uint64_t since_ns) const;

  // Tasks whose stalls went unmeasured: the map was full.
  uint64_t full() const { return full_ == nullptr ? 0 : *full_; }

 private:
  const bpf_map* map_ = nullptr;
  const __u64* full_ = nullptr;
  uint64_t blocked_ns_ = 0;
  std::string runqueue_refused_;
};

// Leaves `*runqueue_ns` (run-queue delays asked for) on where the kernel
// has what the programs measure them with, by its BTF (`btf_path`, or its
// own when empty): each task's sched_info.last_queued (CONFIG_SCHED_INFO)
// and the way from a task to its run queue's clock (se.cfs_rq->rq,
// CONFIG_FAIR_GROUP_SCHED). Else sets it to 0 and returns why.
std::string PlaceRunqueueDelays(const std::string& btf_path, uint64_t* runqueue_ns);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_STALL_TASKS_H_
