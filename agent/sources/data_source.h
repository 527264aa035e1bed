#ifndef RINGSIDE_AGENT_SOURCES_DATA_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_DATA_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringside::agent {

// A data source of a tracing session: it reads kernel events from its
// staging rings on a thread of its own and writes them as TracePackets
// through the TraceWriters of the ProducerBuffer the session gave it. The
// session starts and stops it and asks it what it lost; how it reads the
// kernel is its own business (linux.bpf: BpfDataSource, linux.ftrace:
// FtraceDataSource). source_factory.cc builds them from the config.
class DataSource {
 public:
  // Events of a kind on a CPU.
  struct KindCount {
    uint32_t cpu = 0;
    std::string kind;  // The event ("sched_switch"), or the stage ("ftrace_overrun").
    uint64_t events = 0;
  };
  // Events lost before the buffers, per CPU and kind, for trace_stats.
  using Loss = KindCount;

  // Events the source wrote into packets, per CPU and kind, for the
  // buffers' losses in events (what a reader of the buffers did not read of
  // `committed`).
  struct EventTally {
    uint32_t cpu = 0;
    uint32_t field = 0;         // The FtraceEvent field they are written as.
    std::string kind;           // Its name ("sched_switch").
    uint64_t committed = 0;     // In packets committed to the chunk pool.
    uint64_t pool_dropped = 0;  // In packets dropped for want of a chunk.
  };

  virtual ~DataSource() = default;

  // Attaches to the kernel and starts reading.
  virtual absl::Status Start() = 0;
  // Stops recording new events at once, and only that: a quick switch in
  // the kernel, no reading. The session switches every source off this
  // way before it stops any, so that all end at the same moment: detaching
  // BPF programs takes a grace period each, and events one source recorded
  // meanwhile would name tasks whose fork and exec the other no longer
  // recorded. Stop() does it too.
  virtual void StopRecording() {}
  // Detaches, reads what the staging rings still hold and flushes every
  // writer, so all it saw is committed to its ProducerBuffer. Idempotent.
  virtual void Stop() = 0;
  // For a snapshot fresh to its trigger: has the source's reader read what
  // its staging rings (BPF rings, the kernel's per-CPU ftrace buffers) hold
  // now and commit it to its ProducerBuffer, waiting at most `limit`. Safe
  // while the source runs, from any thread; the rings are still read by the
  // source's thread only. True when that pass finished in time; false at
  // once when the source is not running (not started, or stopping: Stop()
  // reads the rest itself) or has no reader thread of its own.
  virtual bool FlushStaging(absl::Duration limit) = 0;
  // For the durable store (BufferOwner::Flush()): asks the reader for one
  // read pass of the staging rings at its own pace, without waking it or
  // cutting a CPU budget's pause short, and returns the request's number;
  // 0 when the source has no reader running (nothing waits in its rings
  // for one: not started, or Stop() reads the rest).
  virtual uint64_t RequestStagingPass() { return 0; }
  // Whether the pass of request `n` (non-zero) is done: what the staging
  // rings held when it was asked for is committed to the ProducerBuffer
  // (every event made before then; later ones may wait, as a BPF CPU's
  // batch begun since does, and its idle CPU is not interrupted for it).
  virtual bool StagingPassDone(uint64_t n) { return n == 0; }

  // Whether it records the kernel's events (linux.bpf, linux.ftrace), or
  // only samples counters (linux.sys_stats): a recording with none of the
  // first kind holds what /proc says, and says so.
  virtual bool records_kernel_events() const { return true; }
  // Kernel events read from the staging rings so far.
  virtual uint64_t events_read() const = 0;
  // Events lost before the buffers so far (live; for progress lines).
  virtual uint64_t events_lost() const = 0;
  // The same losses, per CPU and kind; only non-zero entries.
  virtual std::vector<Loss> Losses() const = 0;

  // The CPU its reader thread used, and the pauses a consumer CPU budget
  // (max_consumer_cpu_percent) made it take.
  struct ConsumerCpu {
    absl::Duration cpu;
    absl::Duration paused;
    uint64_t pauses = 0;
  };
  virtual ConsumerCpu consumer_cpu() const { return {}; }
  // The events it wrote, per CPU and kind; only non-zero entries. Sources
  // that do not count them return none (their losses after the staging
  // rings are then counted in chunks and bytes only).
  virtual std::vector<EventTally> EventTallies() const { return {}; }
  // The events its kernel probes selected, per CPU and kind (kept or lost
  // at any stage); only non-zero entries. Exact once stopped. Sources that
  // cannot count them per kind return none.
  virtual std::vector<KindCount> EventsSeen() const { return {}; }
  // The kernel memory its staging takes, all CPUs together: BPF rings
  // (which kernels from 5.11 charge to the memory cgroup of the process
  // that made them, the agent's) or ftrace per-CPU buffers (which no
  // cgroup is charged for).
  struct StagingMemory {
    uint64_t bpf_ring_bytes = 0;
    uint64_t ftrace_buffer_bytes = 0;
  };
  virtual StagingMemory staging_memory() const { return {}; }
  // The stacks it records (linux.bpf's bpf_config.stacks): the samples
  // written, what their interning holds, and the heap that names their
  // frames. `recorded` false (all 0) for a source that records none.
  struct StackReport {
    bool recorded = false;
    uint64_t blocked_samples = 0;  // Weighing in blocked_time.
    uint64_t cpu_samples = 0;      // Weighing in cpu_time.
    // Frames and callstacks interned, each once per generation.
    uint64_t frames_named = 0;
    uint64_t frames_unnamed = 0;
    uint64_t callstacks = 0;
    uint64_t interned_bytes = 0;  // What the current generation put in the durable store.
    uint64_t generations = 0;     // Begun, the first included.
    uint64_t remembered_stacks = 0;
    // The symbol tables and caches (kallsyms, the user symbolizer's maps
    // and ELF tables), and the stack writer's interning tables: the
    // agent's heap, approximately.
    uint64_t symbol_bytes = 0;
    uint64_t interning_bytes = 0;
    // Naming user frames (UserSymbolizerStats): frames in no mapping, maps
    // read and unreadable, mappings whose binary was unreadable, processes
    // forgotten for the budget.
    uint64_t user_frames_unmapped = 0;
    uint64_t maps_reads = 0;
    uint64_t maps_unreadable = 0;
    uint64_t binaries_unreadable = 0;
    uint64_t processes_evicted = 0;
    // Blocked threads' stacks: blocks shorter than the period are sampled
    // (0: every block is taken); taken by the switch as threads leave, every
    // block (a kernel without kprobes); the shorter blocks not taken, and
    // their time, which the sampled ones stand for.
    uint64_t blocked_period_ns = 0;
    bool blocked_at_switch = false;
    uint64_t blocked_unsampled = 0;
    uint64_t blocked_unsampled_ns = 0;
  };
  virtual StackReport stacks() const { return {}; }
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_DATA_SOURCE_H_
