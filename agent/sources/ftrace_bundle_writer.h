#ifndef RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_
#define RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/compact_sched.h"
#include "agent/writer/trace_writer.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"

namespace ringside::agent {

// Turns the raw events of one CPU into FtraceEventBundle packets:
//  - sched_switch and sched_waking in compact_sched (Perfetto's columnar
//    form: delta timestamps, comms interned per bundle) unless disabled;
//  - print, sched_wakeup(_new), sched_process_fork/exec/exit/free,
//    task_newtask and task_rename as typed messages;
//  - any other event in the generic form (field names and values), so
//    nothing enabled is silently dropped.
// Not thread-safe; one per reader thread.
class FtraceBundleWriter {
 public:
  struct Options {
    bool compact_sched = true;
    // Told of task_newtask, sched_process_exec/exit and task_rename as they
    // are written (may be null).
    DescriptorTracker* tracker = nullptr;
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
  void WriteBundle(TraceWriter* writer, uint32_t cpu, const std::vector<ftrace::RawEvent>& events,
                   bool lost_events);

  const Stats& stats() const { return stats_; }

 private:
  // How one known event's fields map onto its typed message.
  struct Plan {
    uint32_t event_field = 0;  // Field number in FtraceEvent's oneof (0: generic).
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
  };
  void TellTracker(const ftrace::RawEvent& e, const ftrace::EventTable::Entry& entry,
                   const Plan& plan);
  const Plan& PlanFor(const ftrace::EventTable::Entry& entry);
  void WriteTyped(ProtoMessage* bundle, const ftrace::RawEvent& e,
                  const ftrace::EventTable::Entry& entry, const Plan& plan);

  const ftrace::EventTable* table_;
  Options options_;
  absl::flat_hash_map<uint32_t, Plan> plans_;
  Stats stats_;

  // compact_sched columns of the bundle being written (capacity reused).
  CompactSchedColumns compact_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_FTRACE_BUNDLE_WRITER_H_
