#ifndef RINGSIDE_AGENT_SOURCES_BPF_BUNDLE_WRITER_H_
#define RINGSIDE_AGENT_SOURCES_BPF_BUNDLE_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "agent/sources/compact_sched.h"
#include "agent/writer/trace_writer.h"
#include "bpf/common_events.h"
#include "bpf/records.h"
#include "bpf/ring_reader.h"

namespace ringside::agent {

// Turns a batch of BPF records of one CPU (bpf/*_events.h) into one
// FtraceEventBundle packet, in the same form the ftrace reader writes, so
// that Perfetto's readers treat both alike:
//  - sched_switch in compact_sched (delta timestamps, comms interned per
//    bundle);
//  - wakeups, migrations, fork/exec/exit/free, rename, fatal signals
//    (signal_generate) and OOM victims (mark_victim) as typed events, with
//    ringside's extension fields where the kernel's format has no place
//    (exec argv/uid, exit code);
//  - the FtraceEvent's pid is the task that ran, as ftrace's common_pid
//    (trace_processor files the event under that thread);
//  - core dumps as a generic event "ringside_core_dump".
// Blocked stacks (RS_EV_STACK_BLOCKED) are no FtraceEvent: they are left
// out of the bundle and its counts (StackSampleWriter writes them).
// Records whose size does not match their type are counted and skipped.
// Not thread-safe; one per consumer thread.
class BpfBundleWriter {
 public:
  struct Stats {
    uint64_t bundles = 0;
    uint64_t events[RS_EV_MAX] = {};
    uint64_t malformed = 0;
  };

  // Decodes a batch into `batch`, counting malformed records; returns the
  // well-formed ones (valid until the batch's next Decode).
  absl::Span<const bpf::Record> Decode(absl::Span<const bpf::RecordView> records,
                                       bpf::RecordBatch* batch);

  // `lost_events`: records of this CPU were dropped before the batch.
  void WriteBundle(TraceWriter* writer, uint32_t cpu, absl::Span<const bpf::Record> records,
                   bool lost_events);
  // Decode() and the above.
  void WriteBundle(TraceWriter* writer, uint32_t cpu, absl::Span<const bpf::RecordView> records,
                   bool lost_events);
  // The first, calling `before_part` with each part of `records` in order
  // (kRecordsPerPart records a part) just before the part goes into the
  // bundle: BpfDataSource tells the tracker of a part's records while they
  // are still in the CPU's first-level cache (a whole batch, up to 80 KiB,
  // would have left it by the time the bundle read it).
  static constexpr size_t kRecordsPerPart = 128;
  void WriteBundle(TraceWriter* writer, uint32_t cpu, absl::Span<const bpf::Record> records,
                   bool lost_events,
                   absl::FunctionRef<void(absl::Span<const bpf::Record>)> before_part);

  const Stats& stats() const { return stats_; }
  // Records of each type in the last bundle written.
  const uint64_t (&last_bundle_events() const)[RS_EV_MAX] { return last_bundle_; }
  // The FtraceEvent field a record type is written as (sched_switch's for
  // the compact switches); 0 for an unknown type.
  static uint32_t FieldOf(uint32_t type);
  uint64_t total_events() const;

 private:
  void BeginBundle(TraceWriter* writer, uint32_t cpu, bool lost_events);
  void AddToBundle(absl::Span<const bpf::Record> records);
  void EndBundle();

  Stats stats_;
  uint64_t last_bundle_[RS_EV_MAX] = {};
  // compact_sched columns of the bundle being written (capacity reused).
  CompactSchedColumns compact_;
  // The bundle being written, between BeginBundle() and EndBundle().
  std::optional<TraceWriter::PacketHandle> packet_;
  ProtoMessage* bundle_ = nullptr;
  bpf::RecordBatch decoded_;  // Capacity reused.
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_BPF_BUNDLE_WRITER_H_
