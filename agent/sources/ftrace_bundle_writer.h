#ifndef RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_
#define RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/compact_sched.h"
#include "agent/sources/data_source.h"
#include "agent/sources/event_tally_table.h"
#include "agent/sources/incident.h"
#include "agent/writer/trace_writer.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"

namespace ringside::agent {

// Turns the raw events of one CPU into FtraceEventBundle packets:
//  - sched_switch and sched_waking in compact_sched (Perfetto's columnar
//    form: delta timestamps, comms interned per bundle) unless disabled;
//  - print, sched_wakeup(_new), sched_process_fork/exec/exit/free,
//    task_newtask, task_rename, cpu_frequency, cpu_idle and mark_victim as
//    typed messages;
//  - any other event in the generic form (field names and values), so
//    nothing enabled is silently dropped.
// It tallies the events it writes per CPU and kind, as a reader of the
// packets counts them (CountEventsByKind: the FtraceEvent field of each
// event, one per compact_sched row, every generic event as "generic"),
// split by whether their packet was committed or dropped for want of a
// chunk.
// Not thread-safe; one per reader thread. EventTallies() alone may be called
// from any thread.
class FtraceBundleWriter {
 public:
  struct Options {
    bool compact_sched = true;
    // Told of task_newtask, sched_process_exec/exit/free, task_rename and a
    // dead task's last sched_switch as they are written (may be null).
    DescriptorTracker* tracker = nullptr;
    // CPUs whose events are tallied: 0..num_cpus-1 (0: every configured CPU,
    // sysconf(_SC_NPROCESSORS_CONF)).
    uint32_t num_cpus = 0;
    // Collects the incidents oom/mark_victim and signal/signal_deliver
    // report (OOM kills; signals taken with their default, fatal action),
    // for TakeIncidents().
    bool incidents = false;
  };
  struct Stats {
    uint64_t bundles = 0;
    uint64_t events = 0;
    uint64_t compact_events = 0;
    uint64_t generic_events = 0;
    uint64_t unknown_events = 0;  // Ids not in the event table: skipped, counted.
  };

  FtraceBundleWriter(const ftrace::EventTable* table, Options options);

  // Writes `events` (from one CPU, in order) as one bundle packet.
  // `lost_events`: the kernel lost events on this CPU before the first one.
  // Returns false when the packet was dropped for want of a chunk (its
  // events are tallied as pool_dropped), true when it was written.
  // REQUIRES: no packet of `writer` open; cpu < num_cpus.
  bool WriteBundle(TraceWriter* writer, uint32_t cpu, const std::vector<ftrace::RawEvent>& events,
                   bool lost_events);

  const Stats& stats() const { return stats_; }
  // The incidents of the bundles written since the last call (Options::
  // incidents), in order; their pid is the task's, their tgid, comm (but a
  // victim's since 6.8) and cgroup unknown.
  std::vector<Incident> TakeIncidents() { return std::exchange(incidents_, {}); }
  // The events written so far, per CPU and kind; only non-zero entries.
  // Thread-safe.
  std::vector<DataSource::EventTally> EventTallies() const;

  // The kinds events are tallied by: one per typed message, and one for
  // every event in the generic form.
  static constexpr size_t kNumKinds = 15;

 private:
  // How one known event's fields map onto its typed message.
  struct Plan {
    uint32_t event_field = 0;  // Field number in FtraceEvent's oneof (0: generic).
    uint8_t kind = 0;          // What it is tallied as (an index of kKinds in the .cc).
    std::vector<std::pair<const ftrace::FieldFormat*, uint32_t>> fields;
    const ftrace::FieldFormat* common_pid = nullptr;
    // compact_sched inputs.
    const ftrace::FieldFormat* prev_state = nullptr;
    const ftrace::FieldFormat* pid = nullptr;  // next_pid / pid
    const ftrace::FieldFormat* prio = nullptr;
    const ftrace::FieldFormat* comm = nullptr;
    const ftrace::FieldFormat* target_cpu = nullptr;
    // Descriptor inputs.
    const ftrace::FieldFormat* clone_flags = nullptr;
    const ftrace::FieldFormat* filename = nullptr;
    const ftrace::FieldFormat* newcomm = nullptr;
    const ftrace::FieldFormat* group_dead = nullptr;
    const ftrace::FieldFormat* prev_pid = nullptr;  // sched_switch's, with:
    const ftrace::FieldFormat* prev_comm = nullptr;
    // Incident inputs (signal_deliver's; mark_victim's are pid and comm).
    const ftrace::FieldFormat* sig = nullptr;
    const ftrace::FieldFormat* sa_handler = nullptr;
  };
  void TellTracker(const ftrace::RawEvent& e, const ftrace::EventTable::Entry& entry,
                   const Plan& plan);
  void CollectIncident(const ftrace::RawEvent& e, const ftrace::EventTable::Entry& entry,
                       const Plan& plan);
  const Plan& PlanFor(const ftrace::EventTable::Entry& entry);
  // An event id's table entry and plan (nullptr: not in the table), found
  // in the table and planned once, then read from `resolved_` by id.
  struct Resolved {
    const ftrace::EventTable::Entry* entry = nullptr;
    const Plan* plan = nullptr;
  };
  Resolved Resolve(uint32_t id);
  void WriteTyped(ProtoMessage* bundle, const ftrace::RawEvent& e,
                  const ftrace::EventTable::Entry& entry, const Plan& plan);

  const ftrace::EventTable* table_;
  Options options_;
  // node_hash_map: a plan stays where it is while others are added, for
  // the pointers in resolved_.
  absl::node_hash_map<uint32_t, Plan> plans_;
  // By event id, below kMaxResolvedId (the kernel numbers its event types
  // from 1 up, a few thousand at most; a larger id, which only a malformed
  // record carries, takes the two lookups each time instead of growing
  // this); `known` false until the id is first seen.
  static constexpr uint32_t kMaxResolvedId = 1 << 13;
  struct ResolvedSlot {
    Resolved resolved;
    bool known = false;
  };
  std::vector<ResolvedSlot> resolved_;
  Stats stats_;

  // Events of each kind in the bundle being written.
  uint64_t bundle_events_[kNumKinds] = {};
  // Events written, by CPU and kind. The writing thread adds; any thread
  // reads.
  uint32_t num_cpus_ = 0;
  EventTallyTable tallies_;

  // compact_sched columns of the bundle being written (capacity reused).
  CompactSchedColumns compact_;
  std::vector<Incident> incidents_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_
