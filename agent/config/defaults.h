#ifndef RINGSIDE_AGENT_CONFIG_DEFAULTS_H_
#define RINGSIDE_AGENT_CONFIG_DEFAULTS_H_

#include <cstddef>
#include <cstdint>

#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Every default of the config, in one place. ApplyDefaults() writes them
// into the config itself, so the data sources read plain values and the
// trace's embedded config states what was in effect. docs/config.md names
// each one.

// buffers.size_kb: a buffer is a whole number of 4 KiB pages (its chunks'
// size, and TraceBuffer's page); a size between two is rounded up, as
// Perfetto does, and the effective config states the rounded size.
inline constexpr uint32_t kBufferPageKb = 4;
// The staging memory of the whole machine (staging_budget_kb): the BPF
// rings, the ftrace sources' kernel buffers and the chunk pools of every
// source that leaves its own size unset, split over the CPUs (see
// StagingShares). A fixed size per CPU made the agent's memory grow by
// about 7 MB a CPU: 700 MB at 96 CPUs, past the unit's MemoryMax.
inline constexpr uint64_t kDefaultStagingBudgetKb = 32768;
// What the budget may say: at least 1 MiB, at most 4 GiB.
inline constexpr uint64_t kMinStagingBudgetKb = 1024;
inline constexpr uint64_t kMaxStagingBudgetKb = uint64_t{1} << 22;
// linux.bpf: the per-CPU staging ring a budget gives (rounded down to a
// power of two, as the kernel makes it), no less than the floor (a busy
// CPU's 100 ms at 10,000 events a second, and a whole sched batch eight
// times over) and no more than the ceiling: the default budget's BPF half
// on a 2-CPU machine, so that the rings take the same 16 MiB from 2 CPUs
// to 256 (a machine's memory does not grow with its CPUs; a 4 MiB ceiling
// gave 2-CPU machines 8 MiB, 0.57 MiB a CPU more up to 16 CPUs).
// An explicit ring_size_kb is rounded up to a power of two pages in the
// effective config. And how often the consumer reads the rings.
inline constexpr uint32_t kMinBpfRingSizeKb = 64;
inline constexpr uint32_t kMaxDefaultBpfRingSizeKb = 8192;
inline constexpr uint32_t kDefaultBpfDrainPeriodMs = 100;
// linux.bpf's stacks: frames per stack, blocked threads followed at once
// (a hash map, ~1 MiB; ~9 MiB where the stacks wait with the threads, a
// kernel without kprobes), and the period below which blocks are sampled.
inline constexpr uint32_t kDefaultStackDepth = 32;
inline constexpr uint32_t kDefaultMaxBlockedThreads = 16384;
inline constexpr uint32_t kDefaultBlockedPeriodUs = 1000;
// linux.bpf's stacks.cpu_hz: perf's and Parca's usual rate, prime so that
// it does not beat with work that runs on a round period.
inline constexpr uint32_t kDefaultCpuSampleHz = 49;
// The CPU samples a second a stacks section asks for: cpu_hz, or the
// default when unset; 0: none.
inline uint32_t CpuSampleHz(const config::BpfConfig::Stacks& st) {
  return st.has_cpu_hz() ? st.cpu_hz() : kDefaultCpuSampleHz;
}
// linux.bpf's filter_container_id / filter_cgroup_path: how often the
// cgroups they name are looked up again (containers come and go).
inline constexpr uint32_t kCgroupFilterRefreshMs = 2000;
// linux.ftrace: the per-CPU kernel buffer of our instance a budget gives,
// between a floor and a ceiling (larger when no BPF scheduling runs beside
// it: its bpf_fallback_events, or its own sched events, carry the
// scheduling then); how often it is read, and the fill that wakes the
// reader early.
inline constexpr uint32_t kMinFtraceBufferSizeKb = 64;
inline constexpr uint32_t kMaxDefaultFtraceBufferSizeKb = 2048;
inline constexpr uint32_t kMaxDefaultFtraceAloneBufferSizeKb = 4096;
inline constexpr uint32_t kDefaultFtraceDrainPeriodMs = 100;
inline constexpr uint32_t kDefaultFtraceDrainBufferPercent = 50;
inline constexpr bool kDefaultFtraceCompactSched = true;
// write_into_file: how often the buffers go to the file.
inline constexpr uint32_t kDefaultFileWritePeriodMs = 5000;
// linux.sys_stats with no period set at all: every kind of counter, each
// once a second. Periods are 10 ms to an hour.
inline constexpr uint32_t kDefaultSysStatsPeriodMs = 1000;
inline constexpr uint32_t kMinSysStatsPeriodMs = 10;
inline constexpr uint32_t kMaxSysStatsPeriodMs = 3'600'000;
// linux.process_stats: how often every process is sampled (100 ms to an
// hour), and the resident memory below which a process is left out.
inline constexpr uint32_t kDefaultProcStatsPollMs = 2000;
inline constexpr uint32_t kMinProcStatsPollMs = 100;
inline constexpr uint32_t kDefaultProcStatsMinRssKb = 16384;
// durable_buffer_size_kb when a config leaves it out (an explicit 0 turns
// the store off): without it, a task whose fork the ring has overwritten,
// or that lived across the sources' start and the /proc scan, has no
// process in the file. The capacity is the heap the store takes, its own
// structures counted (DurableStore::EntryCost): a descriptor (one per
// process and per thread) takes about 240 bytes on a Debian machine, so
// 2 MiB hold some 8,500. (The agent's embedded default sets 4096: it runs
// for months.)
inline constexpr uint32_t kDefaultDurableBufferSizeKb = 2048;
// flush_period_ms when streaming (Perfetto's importer warns about a
// streaming config without flushes) or when the durable buffer is on (its
// compaction waits for flushes).
inline constexpr uint32_t kDefaultFlushPeriodMs = 1000;

// trigger_config.triggers.cooldown_ms: the least time between two fires of
// one trigger, so that a crash loop makes one snapshot a minute rather than
// one per crash.
inline constexpr uint32_t kDefaultTriggerCooldownMs = 60000;
// A pressure trigger's window (the kernel takes 500 ms to 10 s; from a
// process without CAP_SYS_RESOURCE, Linux 6.5 and later take multiples of
// 2 s only, hence the default), and the cgroups one trigger may watch.
inline constexpr uint32_t kDefaultPressureWindowMs = 2000;
inline constexpr uint32_t kMinPressureWindowMs = 500;
inline constexpr uint32_t kMaxPressureWindowMs = 10000;
inline constexpr size_t kMaxPressureCgroups = 64;
// An event trigger's filter, in bytes (the kernel takes a page).
inline constexpr size_t kMaxEventFilterBytes = 4096;
// A `blocked` or `runqueue_delay` trigger's threshold, at most an hour; and
// the tasks blocked in D at once whose blocks linux.bpf follows (its
// stall_tasks map: about 100 bytes each, 1.6 MiB of kernel memory; a block
// past them goes unmeasured, counted as the loss stall_tasks_full).
inline constexpr uint32_t kMaxStallThresholdMs = 3600000;
inline constexpr uint32_t kStallTasks = 16384;
// trigger_config.triggers.incident.signals of a FATAL_SIGNAL filter: a
// crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT), not a kill.
inline constexpr int32_t kDefaultCrashSignals[] = {11, 7, 4, 8, 6};

// `ringside agent` only (record ignores these fields): where the lock file
// and the default control socket live, the control socket, and where
// snapshots go.
inline constexpr char kDefaultRunDir[] = "/run/ringside";
inline constexpr char kDefaultControlSocket[] = "/run/ringside/control.sock";
inline constexpr char kDefaultOutputDir[] = "/var/lib/ringside/snapshots";
// The agent's streaming files (write_into_file) when the config bounds
// neither their size nor their age, nor how many are kept.
inline constexpr uint64_t kDefaultStreamFileBytes = uint64_t{64} << 20;
inline constexpr uint32_t kDefaultStreamRotationPeriodMs = 3'600'000;
inline constexpr uint64_t kDefaultStreamTotalBytes = uint64_t{1} << 30;
// The agent's snapshots kept in output_dir when the config bounds neither
// their number nor their bytes.
inline constexpr uint32_t kDefaultMaxSnapshotFiles = 10;
// Snapshots requested by hand: the least time between two, and at most
// this many in any hour, so that a peer of the control socket cannot
// flood the disk or push out what the triggers caught.
inline constexpr uint32_t kDefaultSnapshotRequestCooldownMs = 1000;
inline constexpr uint32_t kDefaultMaxSnapshotRequestsPerHour = 60;
// metrics_period_ms: how often `ringside.prom` is written into
// metrics_textfile (Prometheus' usual scrape interval), and the bounds a
// config may give it (writing it takes well under a millisecond).
inline constexpr uint32_t kDefaultMetricsPeriodMs = 15000;
inline constexpr uint32_t kMinMetricsPeriodMs = 100;
inline constexpr uint32_t kMaxMetricsPeriodMs = 3'600'000;
// max_consumer_cpu_percent of `ringside agent`: the sources' reader threads
// together may use half a CPU; past it the staging rings fill and the
// kernel's drops are counted. `record` has no limit by default.
inline constexpr uint32_t kDefaultAgentConsumerCpuPercent = 50;
// The most max_consumer_cpu_percent may say: a thousand CPUs.
inline constexpr uint32_t kMaxConsumerCpuPercent = 100000;
// The shortest builtin_data_sources.snapshot_interval_ms: a shorter one
// (Perfetto takes any) is taken as this. A clock snapshot is about 60 bytes
// of the ring.
inline constexpr uint32_t kMinClockSnapshotIntervalMs = 100;
// The longest machine_name (SystemInfo.machine_name): a Kubernetes node
// name's 253 (a DNS subdomain; the DaemonSet passes it).
inline constexpr size_t kMaxMachineNameBytes = 253;

// One CPU's share of a staging budget of `budget_kb` on a machine of
// `cpus` CPUs. Of the budget, half goes to the BPF rings, a quarter to
// the ftrace buffers (`ftrace_share`), and a thirty-second to each
// source's chunk pool, on top (at least 4 chunks a CPU: each CPU's writer
// keeps one open). Past the floors the floors win, and the memory grows
// with the CPUs: with the default budget, the chunk pools from 64 CPUs,
// the ftrace buffers from 128, the BPF rings from 256. docs/config.md
// gives the table.
struct StagingShares {
  uint32_t bpf_ring_kb = 0;       // A power of two, at least a page.
  uint32_t ftrace_buffer_kb = 0;  // A multiple of 4 KiB.
  uint32_t chunk_pool_chunks = 0;
};
// The ftrace buffers' share: a quarter beside BPF's scheduling; half
// beside a linux.bpf source that records none (its rings keep their
// half); three quarters with no BPF rings at all (no linux.bpf source, or
// one that could not load), when ftrace records scheduling in BPF's place.
enum class FtraceShare { kBesideBpfScheduling, kBesideBpf, kAlone };
StagingShares StagingSharesFor(uint64_t budget_kb, int cpus, FtraceShare ftrace_share,
                               size_t chunk_size);
// The same without the chunk pools (chunk_pool_chunks 0): the shares of the
// kernel's staging, the BPF rings and the ftrace buffers, which is what
// ApplyDefaults writes into the config. The pools are counted in chunks,
// whose size is the writer's: the source that makes a pool passes it to
// the form above.
StagingShares StagingSharesFor(uint64_t budget_kb, int cpus, FtraceShare ftrace_share);
// The share a config gives its ftrace sources.
FtraceShare FtraceShareOf(const config::TraceConfig& config);
// The CPUs the kernel may ever bring online (/sys/devices/system/cpu/
// possible): the BPF source makes a ring for each.
int PossibleCpus();

// Fills in every field left unset (or 0) with its default, the staging
// sizes from staging_budget_kb for `cpus` CPUs. Idempotent; an explicit
// flush_period_ms of 0 is kept (no periodic flush).
void ApplyDefaults(config::TraceConfig* config, int cpus);
// The same for this machine's PossibleCpus().
void ApplyDefaults(config::TraceConfig* config);
// The agent's settings left unset: output_dir, control_socket,
// max_consumer_cpu_percent, snapshot retention and request limits, and with
// write_into_file the streaming files' size, age and retention. Only the
// agent applies them, so a `record` trace's embedded config does not carry
// settings it never used.
void ApplyAgentDefaults(config::TraceConfig* config);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_DEFAULTS_H_
