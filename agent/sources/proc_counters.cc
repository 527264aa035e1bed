#include "agent/sources/proc_counters.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ringside/trace/sys_stats_counters.pb.h"

namespace ringside::agent {
namespace {

using NamedKey = std::pair<absl::string_view, int>;

// /proc/meminfo's names of MeminfoCounters.
constexpr NamedKey kMeminfoKeys[] = {
    {"MemTotal", trace::MEMINFO_MEM_TOTAL},
    {"MemFree", trace::MEMINFO_MEM_FREE},
    {"MemAvailable", trace::MEMINFO_MEM_AVAILABLE},
    {"Buffers", trace::MEMINFO_BUFFERS},
    {"Cached", trace::MEMINFO_CACHED},
    {"SwapCached", trace::MEMINFO_SWAP_CACHED},
    {"Active", trace::MEMINFO_ACTIVE},
    {"Inactive", trace::MEMINFO_INACTIVE},
    {"Active(anon)", trace::MEMINFO_ACTIVE_ANON},
    {"Inactive(anon)", trace::MEMINFO_INACTIVE_ANON},
    {"Active(file)", trace::MEMINFO_ACTIVE_FILE},
    {"Inactive(file)", trace::MEMINFO_INACTIVE_FILE},
    {"Unevictable", trace::MEMINFO_UNEVICTABLE},
    {"Mlocked", trace::MEMINFO_MLOCKED},
    {"SwapTotal", trace::MEMINFO_SWAP_TOTAL},
    {"SwapFree", trace::MEMINFO_SWAP_FREE},
    {"Dirty", trace::MEMINFO_DIRTY},
    {"Writeback", trace::MEMINFO_WRITEBACK},
    {"AnonPages", trace::MEMINFO_ANON_PAGES},
    {"Mapped", trace::MEMINFO_MAPPED},
    {"Shmem", trace::MEMINFO_SHMEM},
    {"Slab", trace::MEMINFO_SLAB},
    {"SReclaimable", trace::MEMINFO_SLAB_RECLAIMABLE},
    {"SUnreclaim", trace::MEMINFO_SLAB_UNRECLAIMABLE},
    {"KernelStack", trace::MEMINFO_KERNEL_STACK},
    {"PageTables", trace::MEMINFO_PAGE_TABLES},
    {"CommitLimit", trace::MEMINFO_COMMIT_LIMIT},
    {"Committed_AS", trace::MEMINFO_COMMITED_AS},
    {"VmallocTotal", trace::MEMINFO_VMALLOC_TOTAL},
    {"VmallocUsed", trace::MEMINFO_VMALLOC_USED},
    {"VmallocChunk", trace::MEMINFO_VMALLOC_CHUNK},
    {"CmaTotal", trace::MEMINFO_CMA_TOTAL},
    {"CmaFree", trace::MEMINFO_CMA_FREE},
};

// /proc/vmstat's names of VmstatCounters.
constexpr NamedKey kVmstatKeys[] = {
    {"nr_free_pages", trace::VMSTAT_NR_FREE_PAGES},
    {"nr_inactive_anon", trace::VMSTAT_NR_INACTIVE_ANON},
    {"nr_active_anon", trace::VMSTAT_NR_ACTIVE_ANON},
    {"nr_inactive_file", trace::VMSTAT_NR_INACTIVE_FILE},
    {"nr_active_file", trace::VMSTAT_NR_ACTIVE_FILE},
    {"nr_unevictable", trace::VMSTAT_NR_UNEVICTABLE},
    {"nr_mlock", trace::VMSTAT_NR_MLOCK},
    {"nr_anon_pages", trace::VMSTAT_NR_ANON_PAGES},
    {"nr_mapped", trace::VMSTAT_NR_MAPPED},
    {"nr_file_pages", trace::VMSTAT_NR_FILE_PAGES},
    {"nr_dirty", trace::VMSTAT_NR_DIRTY},
    {"nr_writeback", trace::VMSTAT_NR_WRITEBACK},
    {"nr_shmem", trace::VMSTAT_NR_SHMEM},
    {"nr_dirtied", trace::VMSTAT_NR_DIRTIED},
    {"nr_written", trace::VMSTAT_NR_WRITTEN},
    {"workingset_refault", trace::VMSTAT_WORKINGSET_REFAULT},
    {"workingset_activate", trace::VMSTAT_WORKINGSET_ACTIVATE},
    {"workingset_nodereclaim", trace::VMSTAT_WORKINGSET_NODERECLAIM},
    {"pgpgin", trace::VMSTAT_PGPGIN},
    {"pgpgout", trace::VMSTAT_PGPGOUT},
    {"pswpin", trace::VMSTAT_PSWPIN},
    {"pswpout", trace::VMSTAT_PSWPOUT},
    {"pgfree", trace::VMSTAT_PGFREE},
    {"pgfault", trace::VMSTAT_PGFAULT},
    {"pgmajfault", trace::VMSTAT_PGMAJFAULT},
    {"allocstall", trace::VMSTAT_ALLOCSTALL},
    {"compact_stall", trace::VMSTAT_COMPACT_STALL},
    {"oom_kill", trace::VMSTAT_OOM_KILL},
    {"pgscan_direct", trace::VMSTAT_PGSCAN_DIRECT},
    {"pgscan_kswapd", trace::VMSTAT_PGSCAN_KSWAPD},
    {"pgsteal_direct", trace::VMSTAT_PGSTEAL_DIRECT},
    {"pgsteal_kswapd", trace::VMSTAT_PGSTEAL_KSWAPD},
    {"workingset_refault_anon", trace::VMSTAT_WORKINGSET_REFAULT_ANON},
    {"workingset_refault_file", trace::VMSTAT_WORKINGSET_REFAULT_FILE},
};

template <size_t N>
std::optional<int> KeyOf(const NamedKey (&table)[N], absl::string_view name) {
  for (const auto& [n, key] : table) {
    if (n == name) return key;
  }
  return std::nullopt;
}

bool Wanted(const std::vector<int>& wanted, int key) {
  return wanted.empty() || std::find(wanted.begin(), wanted.end(), key) != wanted.end();
}

// "name value" lines (meminfo's "Name:   123 kB" once its colon and unit
// are taken off), each kept when `table` names it and `wanted` wants it.
template <size_t N>
std::vector<ProcCounter> ParseNameValueLines(absl::string_view text, const NamedKey (&table)[N],
                                             const std::vector<int>& wanted, bool colon) {
  std::vector<ProcCounter> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() < 2) continue;
    absl::string_view name = words[0];
    if (colon && !absl::ConsumeSuffix(&name, ":")) continue;
    const std::optional<int> key = KeyOf(table, name);
    uint64_t value = 0;
    if (!key.has_value() || !Wanted(wanted, *key) || !absl::SimpleAtoi(words[1], &value)) continue;
    out.push_back({*key, value});
  }
  return out;
}

// "avg10=0.12" into *value; false when the word is not `name`=number.
template <typename T>
bool NamedNumber(absl::string_view word, absl::string_view name, T* value) {
  if (!absl::ConsumePrefix(&word, name) || !absl::ConsumePrefix(&word, "=")) return false;
  if constexpr (std::is_same_v<T, double>) {
    return absl::SimpleAtod(word, value);
  } else {
    return absl::SimpleAtoi(word, value);
  }
}

}  // namespace

std::vector<ProcCounter> ParseMeminfo(absl::string_view text, const std::vector<int>& wanted) {
  return ParseNameValueLines(text, kMeminfoKeys, wanted, /*colon=*/true);
}

std::vector<ProcCounter> ParseVmstat(absl::string_view text, const std::vector<int>& wanted) {
  return ParseNameValueLines(text, kVmstatKeys, wanted, /*colon=*/false);
}

ProcStat ParseProcStat(absl::string_view text, uint64_t ns_per_tick) {
  ProcStat out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() < 2) continue;
    absl::string_view name = words[0];
    if (name == "processes") {
      uint64_t forks = 0;
      if (absl::SimpleAtoi(words[1], &forks)) out.forks = forks;
      continue;
    }
    // "cpu" is every CPU's sum; "cpu3" is CPU 3's.
    uint32_t cpu = 0;
    if (!absl::ConsumePrefix(&name, "cpu") || !absl::SimpleAtoi(name, &cpu)) continue;
    // user nice system idle iowait irq softirq steal (guest and guest_nice
    // are within user and nice already). Kernels since 2.6.33 write them all.
    uint64_t ticks[8] = {};
    if (words.size() < 9) continue;
    bool ok = true;
    for (size_t i = 0; i < 8; i++) ok = ok && absl::SimpleAtoi(words[1 + i], &ticks[i]);
    if (!ok) continue;
    out.cpus.push_back(CpuTimes{cpu, ticks[0] * ns_per_tick, ticks[1] * ns_per_tick,
                                ticks[2] * ns_per_tick, ticks[3] * ns_per_tick,
                                ticks[4] * ns_per_tick, ticks[5] * ns_per_tick,
                                ticks[6] * ns_per_tick, ticks[7] * ns_per_tick});
  }
  return out;
}

Pressure ParsePressure(absl::string_view text) {
  Pressure out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() != 5 || (words[0] != "some" && words[0] != "full")) continue;
    PressureLine p;
    if (!NamedNumber(words[1], "avg10", &p.avg10) || !NamedNumber(words[2], "avg60", &p.avg60) ||
        !NamedNumber(words[3], "avg300", &p.avg300) ||
        !NamedNumber(words[4], "total", &p.total_us)) {
      continue;
    }
    (words[0] == "some" ? out.some : out.full) = p;
  }
  return out;
}

ProcessMemory ParseProcessStatus(absl::string_view text) {
  ProcessMemory m;
  const std::pair<absl::string_view, uint64_t*> fields[] = {
      {"VmSize:", &m.vm_size_kb},   {"VmRSS:", &m.vm_rss_kb},       {"RssAnon:", &m.rss_anon_kb},
      {"RssFile:", &m.rss_file_kb}, {"RssShmem:", &m.rss_shmem_kb}, {"VmSwap:", &m.vm_swap_kb},
      {"VmLck:", &m.vm_locked_kb},  {"VmHWM:", &m.vm_hwm_kb},
  };
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] != 'V' && line[0] != 'R') continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() < 2) continue;
    for (const auto& [name, field] : fields) {
      if (words[0] == name) (void)absl::SimpleAtoi(words[1], field);
    }
  }
  return m;
}

std::optional<uint64_t> ResidentPagesOfStatm(absl::string_view text) {
  std::vector<absl::string_view> words = absl::StrSplit(text, ' ', absl::SkipEmpty());
  uint64_t pages = 0;
  if (words.size() < 2 || !absl::SimpleAtoi(words[1], &pages)) return std::nullopt;
  return pages;
}

}  // namespace ringside::agent
