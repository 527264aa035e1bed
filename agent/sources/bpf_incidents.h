#ifndef RINGSIDE_AGENT_SOURCES_BPF_INCIDENTS_H_
#define RINGSIDE_AGENT_SOURCES_BPF_INCIDENTS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/sources/incident.h"
#include "bpf/loaded_groups.h"
#include "bpf/records.h"
#include "bpf/stall_tasks.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// The least stalls the config's `blocked` and `runqueue_delay` triggers
// fire on, for the scheduling programs to measure (0: no such trigger),
// and the tasks they follow at once.
bpf::LoadedGroups::Request::Stalls StallsOf(const config::TraceConfig& config);

// The incident a linux.bpf record reports (an OOM kill, a fatal signal, a
// core dump, a stall); nullopt for any other record.
std::optional<Incident> IncidentOfRecord(const bpf::Record& record);

// Whether task `tid` is in D now, by `proc`/TID/stat (a /proc of the
// host's PID namespace); false when it is gone.
bool TaskInD(int32_t tid, const std::string& proc = "/proc");

// The `blocked` triggers' thresholds, ascending, each once.
std::vector<int64_t> BlockedThresholdsOf(const config::TraceConfig& config);

// The sweep of stall_tasks for tasks blocked in D and never woken, which
// the programs cannot report: they see a block only as it ends. A block (a
// task and when it began) is told as it crosses each `blocked` threshold,
// by a sweep or by its wakeup's record, whichever sees it first: once a
// threshold, so that a trigger of 10 s still fires on a block a trigger of
// 1 s fired on. Times are CLOCK_BOOTTIME. Not thread-safe: the linux.bpf
// reader's.
class StallSweep {
 public:
  // `thresholds_ns`: BlockedThresholdsOf's, not empty. The sweep runs every
  // quarter of the least, 100 ms to 1 s.
  explicit StallSweep(std::vector<int64_t> thresholds_ns);

  bool Due(int64_t now_ns) const { return now_ns >= next_ns_; }
  // The incidents of `blocked` (the map's entries past the least
  // threshold, read at `now_ns`) that crossed a threshold not told yet for
  // their block. The next sweep is due a period after `now_ns`.
  std::vector<Incident> Sweep(const std::vector<bpf::StallTasks::Blocked>& blocked, int64_t now_ns);
  // Whether the record of a block that ended (`tid`, `since_ns`, how long)
  // is to be told: not when the sweep told of the block at every threshold
  // it reaches. Forgets the block.
  bool TellWoken(int32_t tid, int64_t since_ns, int64_t stalled_ns);

  int64_t period_ns() const { return period_ns_; }
  // When the next sweep is due (CLOCK_BOOTTIME).
  int64_t next_ns() const { return next_ns_; }

 private:
  // How many thresholds `stalled_ns` reaches.
  size_t Crossed(int64_t stalled_ns) const;

  std::vector<int64_t> thresholds_;
  int64_t period_ns_;
  int64_t next_ns_ = std::numeric_limits<int64_t>::min();
  // Blocks a sweep told of, by tid: when they began, how many thresholds
  // were told, and the sweep that last saw them. Kept a while after no
  // sweep sees one, for its wakeup's record still on the way.
  struct Told {
    int64_t since_ns;
    size_t crossed;
    int64_t seen_ns;
  };
  absl::flat_hash_map<int32_t, Told> told_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_BPF_INCIDENTS_H_
