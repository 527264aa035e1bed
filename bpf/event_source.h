#ifndef RINGSIDE_BPF_EVENT_SOURCE_H_
#define RINGSIDE_BPF_EVENT_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"
#include "bpf/drop_counters.h"
#include "bpf/event_types.h"
#include "bpf/loaded_groups.h"
#include "bpf/ring_reader.h"
#include "bpf/stack_maps.h"
#include "bpf/stall_tasks.h"

namespace ringside::bpf {

// Loads and attaches the ringside BPF programs — sched (bpf/sched.bpf.c),
// process (bpf/process.bpf.c) and incidents (bpf/incidents.bpf.c), each
// group optional — and reads their records from one BPF ring buffer per
// CPU. Every group writes into the same rings, so a CPU's records come out
// in the order they were reserved. Records are the structs of
// bpf/*_events.h, each starting with rs_event_header. The objects are a
// LoadedGroups (bpf/loaded_groups.h); this creates the maps they share,
// and reads and counts what they record.
//
// Everything is detached and closed on destruction, so a test that fails
// half-way leaves no program attached. Not thread-safe, except Wake().
class EventSource {
 public:
  using Filters = LoadedGroups::Filters;
  // The groups to load and how (LoadedGroups::Request: sched, process,
  // incidents, batch_sched, one_object, filters), and the rings and BTF
  // they load with.
  struct Options : LoadedGroups::Request {
    size_t ring_size_per_cpu = 1 << 20;  // Bytes; rounded up to a power of two pages.
    // The kernel's BTF as a file, for a kernel that does not expose it at
    // /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF off; BTFHub, or pahole
    // on the kernel's debug vmlinux, makes one). CO-RE relocates against it,
    // and each program's raw_tp flavour runs, as tp_btf needs the kernel's
    // own BTF. Empty: /sys/kernel/btf/vmlinux.
    std::string btf_path;
  };
  // The tracepoints ("group/name", as tracefs names them) whose every hit
  // the programs of `options`' groups record, filters aside: what an ftrace
  // source leaves out while they run, so that nothing is recorded twice.
  // (The incident programs record incidents, not these events.)
  static std::vector<std::string> RecordedTracepoints(const Options& options) {
    std::vector<std::string> tracepoints;
    for (const EventType& e : kEventTypes) {
      const bool on = e.group == Group::kSched     ? options.sched
                      : e.group == Group::kProcess ? options.process
                                                   : options.incidents;
      if (on && e.every_hit) tracepoints.emplace_back(e.tracepoint);
    }
    return tracepoints;
  }
  struct ProgramStats {
    std::string name;
    uint64_t run_count = 0;    // Filled while kernel BPF stats are on
    uint64_t run_time_ns = 0;  // (EnableKernelStats or kernel.bpf_stats_enabled).
    uint64_t missed = 0;       // Runs the kernel skipped (recursion): events lost.
  };

  // Opens and loads the programs. Errors say what to do: kPermissionDenied
  // naming CAP_BPF/CAP_PERFMON, kResourceExhausted for the memlock limit,
  // kUnavailable for a kernel without BTF (and no btf_path),
  // kInvalidArgument for a btf_path that is no kernel's BTF, and with the
  // verifier's log for a rejected program: those of the first group asked
  // for, when no group loads. A group that cannot load while others can is
  // left out and named in refused_groups(). Programs whose tracepoint this
  // kernel lacks are skipped and listed in skipped_programs().
  static absl::StatusOr<std::unique_ptr<EventSource>> Load(const Options& options);
  ~EventSource();
  EventSource(const EventSource&) = delete;
  EventSource& operator=(const EventSource&) = delete;

  // Attaches the programs, recording.
  absl::Status Attach();
  // Stops every program recording at once (if not already), then detaches
  // them.
  void Detach();
  // Every program stops (or starts again) recording at once, attached or
  // not: plain stores into each object's `stopping` flags (rings.bpf.h),
  // one a type, the process types first on and last off. A program that
  // read its flag before it changed finishes its record.
  void SetRecording(bool on);

  // Replaces the cgroup set (Filters::cgroup_set) with `cgroup_ids`, at most
  // RS_MAX_FILTER_CGROUPS of them (kInvalidArgument otherwise); takes effect
  // at once, attached or not. Programs see the set change one id at a time.
  absl::Status SetCgroupFilter(const std::vector<uint64_t>& cgroup_ids);

  // Hands every record in the rings to `callback` in per-CPU batches, then
  // sends each CPU's batch of scheduling records to its ring
  // (FlushSchedBatches) and hands those out too (the rings are read first,
  // so that a full one does not drop the batch): all the programs recorded
  // before the call, each record once. The records of a batch are handed out one by one, never
  // the batch. A CPU's batched records (scheduling; fork, exit, rename and
  // free in the one object) stay in order, but the others may come before
  // ones that preceded them (an exec, an incident or a stack before the
  // switches of its last moments; with each group's own object, an exit too).
  uint64_t Drain(const RingReader::BatchCallback& callback);
  // The same for what the programs recorded before `before_ns`
  // (CLOCK_BOOTTIME, the records' clock): only the batches holding a record
  // older than that are sent. One whose oldest record came later holds
  // nothing it is asked for, and its CPU, often idle, is not interrupted.
  // Records already in the rings are all handed out, newer ones too.
  uint64_t DrainBefore(uint64_t before_ns, const RingReader::BatchCallback& callback);
  // The same after waiting up to `timeout_ms` (see RingReader), flushing
  // only the batches whose oldest record waited kBatchMaxWaitNs: a busy CPU
  // fills its batch long before, and an idle machine's CPUs are not
  // interrupted at every poll.
  absl::StatusOr<uint64_t> Poll(int timeout_ms, const RingReader::BatchCallback& callback);
  void Wake() { reader_->Wake(); }
  static constexpr uint64_t kBatchMaxWaitNs = 500'000'000;
  // Sends the batch of each online CPU with records waiting (the oldest
  // made before `before_ns`, CLOCK_BOOTTIME) to its ring: a
  // BPF_PROG_TEST_RUN of flush_sched_batch on that CPU, an IPI to any other
  // than the caller's. A CPU that is offline keeps its batch until it
  // returns.
  void FlushSchedBatches(uint64_t before_ns = UINT64_MAX);
  // Bytes of records per batch; 0 when not batched.
  uint32_t sched_batch_bytes() const { return groups_->sched_batch_bytes(); }
  // Records of a type waiting in each CPU's batch (index: CPU), like
  // drops_per_cpu: after a Drain(), those of a CPU that was offline.
  std::vector<uint64_t> records_waiting(uint32_t event_type) const;

  // Reserve failures (records the rings refused) of an event type on a
  // CPU; read from the mapped counters, without a system call: the reader
  // asks on every pass.
  uint64_t drop_count(uint32_t cpu, uint32_t event_type) const {
    return drops_.count(cpu, event_type);
  }
  // Of every type on a CPU.
  uint64_t drops_of_cpu(uint32_t cpu) const { return drops_.of_cpu(cpu); }
  // Of a type, per CPU and summed.
  std::vector<uint64_t> drops_per_cpu(uint32_t event_type) const;
  uint64_t drops(uint32_t event_type) const;
  // drops_per_cpu of every type at once (index: type, then CPU; RS_EV_MAX
  // types).
  std::vector<std::vector<uint64_t>> all_drops_per_cpu() const;
  // Records the programs made, sent into a ring or dropped, per type and
  // CPU (index: type, then CPU), those waiting in a batch included: every
  // run that selected its event. Exact once detached and drained; while
  // attached, a moment's figure.
  std::vector<std::vector<uint64_t>> all_seen_per_cpu() const;
  // Runs of the programs of an event type while recording was off (attached
  // but before recording began or after it stopped): neither recorded nor
  // lost. Their kernel run count is records + drops + this.
  uint64_t not_recorded(uint32_t event_type) const;

  // The stacks' maps and CPU sampling (Options::stacks; flags() 0 when off).
  const StackMaps& stacks() const { return stacks_; }

  // The stalls' map (Options::stalls), for the sweep of tasks blocked and
  // never woken; empty when stalls are not measured.
  const StallTasks& stalls() const { return stalls_; }

  // Kernel-side statistics of every loaded program.
  std::vector<ProgramStats> program_stats() const;
  // Turns on the kernel's per-program run time accounting until the
  // returned fd is closed (BPF_ENABLE_STATS). Returns -1 with errno on error.
  static int EnableKernelStats();

  const std::vector<std::string>& skipped_programs() const { return groups_->skipped(); }
  // A group asked for that this kernel cannot run while others load (a
  // group whose program the verifier refuses). Load() fails only when none
  // loads.
  using RefusedGroup = LoadedGroups::RefusedGroup;
  const std::vector<RefusedGroup>& refused_groups() const { return groups_->refused(); }
  // The groups loaded (as Options' sched, process, incidents; the other
  // fields as default).
  Options loaded_groups() const {
    Options o;
    o.sched = groups_->has_sched();
    o.process = groups_->has_process();
    o.incidents = groups_->has_incidents();
    return o;
  }
  // Whether the groups loaded as one object (Options::one_object), not each
  // as its own.
  bool one_object() const { return groups_->one_object(); }
  // Why the three groups, all asked for, did not load as one object (they
  // were then loaded each on its own: refused_groups() says which could
  // not); empty when they did or were not tried.
  const std::string& one_object_refused() const { return groups_->one_object_refused(); }
  // Whether the programs run as raw tracepoints (the kernel's BTF is not
  // at /sys/kernel/btf/vmlinux: Options::btf_path) rather than tp_btf.
  bool raw_tracepoints() const { return raw_tracepoints_; }
  int num_cpus() const { return num_cpus_; }
  size_t ring_size() const { return ring_size_; }
  const RingReader& reader() const { return *reader_; }
  // The shared maps, for programs outside bpf/ (the benchmarks' filler)
  // that write into the same rings, and for other consumers to compare with.
  int rings_map_fd() const { return rings_fd_.get(); }
  int drops_map_fd() const { return drops_.fd(); }
  // Each CPU's ring (index: CPU), still owned by this.
  std::vector<int> ring_fds() const {
    std::vector<int> fds;
    for (const base::ScopedFd& ring : rings_) fds.push_back(ring.get());
    return fds;
  }

 private:
  EventSource() = default;
  // Creates the maps every program shares (the rings of
  // `ring_size_per_cpu` bytes, rounded up, the drop counters, the cgroup
  // set) and the reader of the rings.
  absl::Status CreateMaps(size_t ring_size_per_cpu);
  // `callback`, with each scheduling batch replaced by its records; counts the
  // records it hands out into `*handed_out`.
  RingReader::BatchCallback Unbatching(const RingReader::BatchCallback& callback,
                                       uint64_t* handed_out);

  bool raw_tracepoints_ = false;
  // What loaded; null only while Load() has not got that far.
  std::unique_ptr<LoadedGroups> groups_;
  base::ScopedFd rings_fd_;               // ARRAY_OF_MAPS: CPU -> ring.
  DropCounters drops_;                    // ARRAY: CPU -> rs_drop_counts, mapped.
  base::ScopedFd seen_fd_;                // PERCPU_ARRAY: one rs_seen_counts.
  base::ScopedFd filter_cgroups_fd_;      // HASH: cgroup id -> unused; the cgroup set.
  std::vector<uint64_t> filter_cgroups_;  // What the map holds, sorted.
  std::vector<base::ScopedFd> rings_;     // Each CPU's BPF_MAP_TYPE_RINGBUF.
  std::unique_ptr<RingReader> reader_;
  int num_cpus_ = 0;
  size_t ring_size_ = 0;
  std::vector<RecordView> unbatched_;  // Unbatching()'s room: kMaxBatch views, sized once.
  StackMaps stacks_;
  StallTasks stalls_;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_EVENT_SOURCE_H_
