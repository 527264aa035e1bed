#ifndef RINGSIDE_AGENT_SOURCES_PROC_COUNTERS_H_
#define RINGSIDE_AGENT_SOURCES_PROC_COUNTERS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringside::agent {

// The parsers of the /proc files linux.sys_stats samples. Each takes the
// file's text as the kernel wrote it and keeps what it recognises; a line
// it cannot read is skipped, never a reason to fail (a kernel may add or
// reorder lines, and a field too long for its type is left out).

// A counter of /proc/meminfo or /proc/vmstat: its number in Perfetto's
// MeminfoCounters or VmstatCounters, and its value (KiB for meminfo).
struct ProcCounter {
  int key = 0;
  uint64_t value = 0;
};

// The meminfo counters ringside knows, by their /proc/meminfo name
// ("MemAvailable"), in the file's order. `wanted`: the keys to keep (empty:
// all).
std::vector<ProcCounter> ParseMeminfo(absl::string_view text, const std::vector<int>& wanted);
// The same for /proc/vmstat ("pgmajfault").
std::vector<ProcCounter> ParseVmstat(absl::string_view text, const std::vector<int>& wanted);

// /proc/stat: each CPU's times (its "cpuN" lines; the "cpu" total is left
// out) in ns, and the forks since boot ("processes").
struct CpuTimes {
  uint32_t cpu = 0;
  uint64_t user_ns = 0, nice_ns = 0, system_ns = 0, idle_ns = 0, iowait_ns = 0, irq_ns = 0,
           softirq_ns = 0, steal_ns = 0;
};
struct ProcStat {
  std::vector<CpuTimes> cpus;
  std::optional<uint64_t> forks;
};
// `ns_per_tick`: 1e9 / USER_HZ (sysconf(_SC_CLK_TCK)).
ProcStat ParseProcStat(absl::string_view text, uint64_t ns_per_tick);

// One /proc/pressure file (or a cgroup's *.pressure): the "some" and "full"
// lines' averages (percent) and totals (µs). A kernel before 5.13 has no
// "full" line for cpu.
struct PressureLine {
  double avg10 = 0, avg60 = 0, avg300 = 0;
  uint64_t total_us = 0;
};
struct Pressure {
  std::optional<PressureLine> some;
  std::optional<PressureLine> full;
};
Pressure ParsePressure(absl::string_view text);

// A process's memory, from /proc/PID/status (KiB); a line missing (a
// kernel thread has none of them) leaves its field 0.
struct ProcessMemory {
  uint64_t vm_size_kb = 0, vm_rss_kb = 0, rss_anon_kb = 0, rss_file_kb = 0, rss_shmem_kb = 0,
           vm_swap_kb = 0, vm_locked_kb = 0, vm_hwm_kb = 0;
};
ProcessMemory ParseProcessStatus(absl::string_view text);
// The resident pages of /proc/PID/statm (its second field); nullopt when
// it does not read.
std::optional<uint64_t> ResidentPagesOfStatm(absl::string_view text);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_PROC_COUNTERS_H_
