#ifndef RINGSIDE_AGENT_SOURCES_BPF_DATA_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_BPF_DATA_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/config/defaults.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/bpf_bundle_writer.h"
#include "agent/sources/bpf_incidents.h"
#include "agent/sources/cgroup_selector.h"
#include "agent/sources/cpu_budget.h"
#include "agent/sources/data_source.h"
#include "agent/sources/event_tally_table.h"
#include "agent/sources/incident.h"
#include "agent/sources/stack_figures.h"
#include "agent/sources/stack_sample_writer.h"
#include "agent/sources/staging_flush.h"
#include "agent/sources/task_teller.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "base/boottime.h"
#include "base/owner_thread.h"
#include "bpf/event_source.h"

namespace ringside::agent {

// The "linux.bpf" data source: the programs of bpf/ (sched, process,
// incidents) and one consumer thread that reads their per-CPU rings every
// drain_period_ms (up to a second while they are quiet: DrainWait; sooner
// when a ring passes a quarter full, or at an incident) into
// FtraceEventBundles: one TraceWriter per CPU, writer id 1 + cpu.
//
// Stop() is clean: programs detached, the rings read to the last record,
// the writers flushed.
class BpfDataSource : public DataSource {
 public:
  struct Config {
    bpf::EventSource::Options source;
    uint32_t drain_period_ms = kDefaultBpfDrainPeriodMs;
    // filter_container_id / filter_cgroup_path: when either is set, the
    // programs' cgroup set filter is on, filled before they attach and
    // looked up again every cgroup_refresh_ms (CgroupSelector).
    std::vector<std::string> filter_container_ids;
    std::vector<std::string> filter_cgroup_paths;
    uint32_t cgroup_refresh_ms = kCgroupFilterRefreshMs;
    // Told of fork/exec/exit/rename/free records as they are read (may be null).
    DescriptorTracker* tracker = nullptr;
    // The `blocked` triggers' thresholds (BlockedThresholdsOf), each a
    // crossing the sweep tells of.
    std::vector<int64_t> blocked_thresholds_ns;
    // Told of OOM kills, fatal signals, core dumps and stalls once their
    // bundle is written, and of the tasks found blocked by the sweep of
    // stall_tasks (source.stalls) as it finds them (may be null).
    IncidentListener* incidents = nullptr;
    // max_consumer_cpu_percent, shared with the recording's other readers
    // (may be null: no limit).
    CpuBudget* cpu_budget = nullptr;
    // With source.stacks on: the durable store's bytes the stacks' interned
    // data may take before it starts a new generation (StackSampleWriter),
    // and what names their frames (null: the running system's kallsyms and
    // /proc, SystemFrameNamer). Stacks need the tracker.
    size_t stacks_interned_budget_bytes = 1 << 20;
    FrameNamer* frame_namer = nullptr;
  };

  // Loads the programs (not attached yet). The error names what is missing
  // (BTF, CAP_BPF/CAP_PERFMON, memlock) or carries the verifier's log.
  static absl::StatusOr<std::unique_ptr<BpfDataSource>> Create(Config config,
                                                               ProducerBuffer* producer);
  ~BpfDataSource() override;

  // Attaches the programs and starts the consumer thread.
  absl::Status Start() override;
  // Every program stops recording at once; still attached.
  void StopRecording() override;
  // Detaches, reads everything left in the rings and flushes; idempotent.
  void Stop() override;
  // Wakes the consumer thread for a pass over every ring; its writers'
  // chunks are committed after it.
  bool FlushStaging(absl::Duration limit) override;
  uint64_t RequestStagingPass() override { return flush_.RequestInBackground(base::BoottimeNs()); }
  bool StagingPassDone(uint64_t n) override { return flush_.IsServed(n); }

  uint64_t events_read() const override { return events_.load(std::memory_order_relaxed); }
  uint64_t events_lost() const override;
  // Reserve failures per CPU and record type (kind: the record's event
  // name), and runs the kernel skipped ("bpf_missed_runs"); only non-zero
  // entries.
  std::vector<Loss> Losses() const override;
  ConsumerCpu consumer_cpu() const override {
    return {pacer_.cpu(), pacer_.paused(), pacer_.pauses()};
  }
  std::vector<EventTally> EventTallies() const override;
  std::vector<KindCount> EventsSeen() const override;
  StagingMemory staging_memory() const override;
  const std::vector<std::string>& skipped_programs() const { return source_->skipped_programs(); }
  // The program groups this kernel could not run while the others load.
  const std::vector<bpf::EventSource::RefusedGroup>& refused_groups() const {
    return source_->refused_groups();
  }
  const std::string& one_object_refused() const { return source_->one_object_refused(); }
  bpf::EventSource::Options loaded_groups() const { return source_->loaded_groups(); }
  bool raw_tracepoints() const { return source_->raw_tracepoints(); }
  // What the cgroup filter's first lookup (at Create) said: a value that
  // named no cgroup yet, more cgroups than the filter holds.
  const std::vector<std::string>& cgroup_filter_warnings() const { return cgroup_warnings_; }

  // What the reader thread last published of its stacks (all 0 when they
  // are not recorded); any thread.
  StackReport stacks() const override {
    return stacks_ == nullptr
               ? StackReport{}
               : stack_figures_.Report(source_->stacks(), config_.source.stacks.blocked_period_ns);
  }
  // Why stacks asked for are not recorded (no durable store); empty when
  // they are or were not asked for.
  const std::string& stacks_refused() const { return stacks_refused_; }
  // Why blocked threads' stacks asked for are not taken; empty when they are.
  const std::string& blocked_refused() const { return source_->stacks().blocked_refused(); }
  // Why user frames go unnamed, all of them (FrameNamer); empty when they
  // are named, or not recorded.
  std::string user_frames_unnamed_reason() const {
    if (namer_ == nullptr || (source_->stacks().flags() & RS_STACKS_USER) == 0) return "";
    return namer_->user_frames_unnamed_reason();
  }
  // Why the `runqueue_delay` triggers' waits are not measured on this
  // kernel; empty when they are, or none was asked for.
  const std::string& runqueue_refused() const { return source_->stalls().runqueue_refused(); }
  // Blocked threads' stacks taken by the switch, every block (a kernel
  // without kprobes), rather than sampled as threads run again.
  bool blocked_stacks_at_switch() const { return source_->stacks().blocked_at_switch(); }
  // Why CPU samples asked for are not taken; empty when they are.
  const std::string& cpu_sampling_refused() const {
    return source_->stacks().cpu_sampling_refused();
  }
  // The stack samples' writer id: one sequence beside the CPUs' (1 + cpu).
  static constexpr buffer::WriterID kStackWriterId = 0x7fff;

  // Name of a record type, as in the trace ("sched_switch").
  static const char* EventName(uint32_t type);

 private:
  BpfDataSource(Config config, ProducerBuffer* producer);
  void ConsumerLoop();
  // Creates the stack writer, or says in stacks_refused_ why not.
  void SetUpStacks(ProducerBuffer* producer);
  // Reads the rings once: waiting up to `timeout_ms` for data, or (0)
  // reading what is there and the CPUs' batches holding a record made
  // before `batches_before_ns` (EventSource::DrainBefore). Returns how many
  // records it handed out.
  uint64_t ReadRings(int timeout_ms, uint64_t batches_before_ns = UINT64_MAX);
  // Consumer thread: serves FlushStaging() requests made so far.
  void ServeFlushRequests();
  void OnBatch(uint32_t cpu, absl::Span<const bpf::RecordView> records);
  void TellIncidents(absl::Span<const bpf::Record> records);
  // Reader thread: tells of the tasks the sweep finds blocked and not woken.
  void SweepStalls(int64_t now_ns);
  // Reader thread: the stack writer's and the namer's figures, for stacks().
  void PublishStacks() {
    stack_figures_.Publish(stacks_->stats(), namer_->user_stats(), namer_->memory_bytes(),
                           stacks_->memory_bytes());
  }
  // Looks the filter's cgroups up again and hands them to the programs;
  // returns what the lookup found.
  CgroupSelector::Selection RefreshCgroupFilter();

  Config config_;
  ProducerBuffer* producer_;
  std::unique_ptr<bpf::EventSource> source_;
  // The reader's state below (bundles_ to cgroups_, and the writing side of
  // cpu_writers_): the creating thread's, then the reader thread's, then
  // Stop()'s after the join.
  base::OwnerThread reader_state_{"linux.bpf's reader state"};
  BpfBundleWriter bundles_;
  bpf::RecordBatch decoded_;  // The batch being written; capacity reused.
  std::vector<std::unique_ptr<TraceWriter>> cpu_writers_;
  // Blocked stacks (source.stacks), when recorded: their writer and what
  // names their frames.
  std::unique_ptr<FrameNamer> own_namer_;
  FrameNamer* namer_ = nullptr;  // own_namer_, or the config's.
  // Processes whose exit the last pass and this one read (ForgetProcess).
  std::vector<int32_t> exited_before_;
  std::vector<int32_t> exited_;
  std::unique_ptr<TraceWriter> stack_trace_writer_;
  std::unique_ptr<StackSampleWriter> stacks_;
  std::string stacks_refused_;
  // Of stacks_->stats() and the memory of stacks_ and namer_, for any
  // thread.
  StackFigures stack_figures_;
  // Drops seen per CPU so far; a CPU whose count grew marks its next bundle.
  std::vector<uint64_t> drops_seen_;
  std::vector<bool> lost_pending_;
  TaskTeller teller_{config_.tracker};
  CgroupSelector cgroups_;
  std::vector<std::string> cgroup_warnings_;
  // With blocks measured (source.stalls) and a listener: the sweep for the
  // tasks never woken.
  std::unique_ptr<StallSweep> sweep_;
  // /proc numbers tasks as the kernel does (the host's PID namespace): the
  // sweep checks a task is in D there.
  bool proc_is_hosts_ = false;

  std::thread thread_;
  StagingFlush flush_;
  std::atomic<bool> stop_{false};
  // Measures the reader thread, and pauses it past the budget (if any).
  ConsumerPacer pacer_{config_.cpu_budget};
  std::atomic<uint64_t> events_{0};
  // Records the decoder refused (a size that does not match the type), as
  // bundles_ counts them; for Losses() on any thread.
  std::atomic<uint64_t> malformed_{0};
  // Records written, by CPU and type. Consumer thread writes.
  std::unique_ptr<EventTallyTable> tallies_;
  bool started_ = false;
  // Written by Stop() (the main thread), read by Losses() on any thread
  // (status, the streaming file's end on the drain thread).
  std::atomic<bool> stopped_{false};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_BPF_DATA_SOURCE_H_
