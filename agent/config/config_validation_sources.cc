// The checks of a config's data sources: each source's name, buffer and
// settings (linux.ftrace's, linux.bpf's), and the buffers no source writes
// into. CheckConfig (config_validation.cc) runs them after the rest.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_limits.h"
#include "agent/config/defaults.h"
#include "agent/config/internal/config_validator.h"

namespace ringside::agent::internal {
namespace {

void CheckContainerId(const std::string& id, const FieldPath& at, Validator* v) {
  const bool hex = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!hex || id.size() < kMinContainerIdPrefix || id.size() > kContainerIdDigits) {
    v->Fail(at, absl::StrCat("is '", absl::CHexEscape(id), "': a container id is ",
                             kMinContainerIdPrefix, " to ", kContainerIdDigits,
                             " lowercase hex digits (the full id, or a prefix of it such as "
                             "`docker ps` shows)"));
  }
}

// Per-CPU kernel buffers, together, may take at most half the machine.
void CheckPerCpuMemory(const FieldPath& path, uint64_t kb, const MachineLimits& machine,
                       Validator* v) {
  const int cpus = std::max(1, machine.cpus);
  const uint64_t memory_kb = machine.memory_kb;
  if (memory_kb > 0 && kb * static_cast<uint64_t>(cpus) > memory_kb / 2) {
    v->Fail(path, absl::StrCat("is ", kb, ": ", cpus, " CPUs of ", Kb(kb),
                               " exceed half of this machine's ", Kb(memory_kb),
                               " of memory, which the kernel would refuse or the machine "
                               "miss"));
  }
}

void CheckFtraceConfig(const config::FtraceConfig& f, const FieldPath& at,
                       const MachineLimits& machine, Validator* v) {
  auto field = [&](const std::string& name) { return Child(Child(at, "ftrace_config"), name); };
  if (f.ftrace_events_size() == 0 && f.bpf_fallback_events_size() == 0) {
    v->Fail(Child(at, "name"),
            "is linux.ftrace, which needs ftrace_config { ftrace_events: \"group/name\" "
            "... } (or bpf_fallback_events)");
  }
  if (f.buffer_size_kb() > kMaxFtraceBufferSizeKb) {
    v->Fail(field("buffer_size_kb"),
            absl::StrCat("is ", f.buffer_size_kb(), ": at most ", kMaxFtraceBufferSizeKb, " (",
                         Kb(kMaxFtraceBufferSizeKb), ") per CPU"));
  }
  CheckPerCpuMemory(field("buffer_size_kb"), f.buffer_size_kb(), machine, v);
  if (f.drain_buffer_percent() > 100) {
    v->Fail(field("drain_buffer_percent"),
            absl::StrCat("is ", f.drain_buffer_percent(), ": a percentage, at most 100"));
  }
}

void CheckSysStatsConfig(const config::SysStatsConfig& st, const FieldPath& at, Validator* v) {
  auto field = [&](const std::string& name) { return Child(Child(at, "sys_stats_config"), name); };
  for (const auto& [name, period] : {std::pair{"meminfo_period_ms", st.meminfo_period_ms()},
                                     std::pair{"vmstat_period_ms", st.vmstat_period_ms()},
                                     std::pair{"stat_period_ms", st.stat_period_ms()},
                                     std::pair{"psi_period_ms", st.psi_period_ms()}}) {
    if (period != 0 && (period < kMinSysStatsPeriodMs || period > kMaxSysStatsPeriodMs)) {
      v->Fail(field(name), absl::StrCat("is ", period, ": 0 (not read) or ", kMinSysStatsPeriodMs,
                                        " to ", kMaxSysStatsPeriodMs, " ms"));
    }
  }
  for (int i = 0; i < st.stat_counters_size(); i++) {
    const auto c = st.stat_counters(i);
    if (c != config::SysStatsConfig::STAT_CPU_TIMES &&
        c != config::SysStatsConfig::STAT_FORK_COUNT) {
      v->Fail(Child(Child(at, "sys_stats_config"), "stat_counters", i),
              absl::StrCat("is ", config::SysStatsConfig::StatCounters_Name(c),
                           ": ringside writes STAT_CPU_TIMES and STAT_FORK_COUNT only"));
    }
  }
  const bool any_set = st.has_meminfo_period_ms() || st.has_vmstat_period_ms() ||
                       st.has_stat_period_ms() || st.has_psi_period_ms();
  if (any_set && st.meminfo_period_ms() == 0 && st.vmstat_period_ms() == 0 &&
      st.stat_period_ms() == 0 && st.psi_period_ms() == 0) {
    v->Fail(Child(at, "sys_stats_config"),
            "reads nothing: every *_period_ms is 0 (leave them all unset for each kind once a "
            "second)");
  }
}

void CheckProcessStatsConfig(const config::ProcessStatsConfig& ps, const FieldPath& at,
                             Validator* v) {
  if (ps.has_proc_stats_poll_ms() && (ps.proc_stats_poll_ms() < kMinProcStatsPollMs ||
                                      ps.proc_stats_poll_ms() > kMaxSysStatsPeriodMs)) {
    v->Fail(Child(Child(at, "process_stats_config"), "proc_stats_poll_ms"),
            absl::StrCat("is ", ps.proc_stats_poll_ms(), ": ", kMinProcStatsPollMs, " to ",
                         kMaxSysStatsPeriodMs, " ms (unset: ", kDefaultProcStatsPollMs, ")"));
  }
}

void CheckBpfConfig(const config::BpfConfig& b, const FieldPath& at, const MachineLimits& machine,
                    Validator* v) {
  auto field = [&](const std::string& name, int index = -1) {
    return Child(Child(at, "bpf_config"), name, index);
  };
  if (b.ring_size_kb() > kMaxBpfRingSizeKb) {
    v->Fail(field("ring_size_kb"),
            absl::StrCat("is ", b.ring_size_kb(), ": a BPF ring buffer holds at most ",
                         kMaxBpfRingSizeKb, " (", Kb(kMaxBpfRingSizeKb), ") per CPU"));
  }
  CheckPerCpuMemory(field("ring_size_kb"), b.ring_size_kb(), machine, v);
  if (b.filter_tgid_size() > kMaxFilterTgids) {
    v->Fail(field("filter_tgid", kMaxFilterTgids),
            absl::StrCat("is one of ", b.filter_tgid_size(), " filter_tgid values: at most ",
                         kMaxFilterTgids, " can be given"));
  }
  if (b.has_filter_max_prio() && (b.filter_max_prio() < 0 || b.filter_max_prio() > 139)) {
    v->Fail(field("filter_max_prio"),
            absl::StrCat("is ", b.filter_max_prio(), ": kernel priorities are 0 to 139"));
  }
  for (int k = 0; k < b.filter_container_id_size(); k++) {
    CheckContainerId(b.filter_container_id(k), field("filter_container_id", k), v);
  }
  for (int k = 0; k < b.filter_cgroup_path_size(); k++) {
    CheckCgroupPath(b.filter_cgroup_path(k), field("filter_cgroup_path", k), v);
  }
  if (b.has_stacks()) {
    const config::BpfConfig::Stacks& st = b.stacks();
    auto stacks_field = [&](const std::string& name) { return Child(field("stacks"), name); };
    if (st.has_max_depth() && (st.max_depth() < 1 || st.max_depth() > kMaxStackDepth)) {
      v->Fail(stacks_field("max_depth"),
              absl::StrCat("is ", st.max_depth(), ": frames per stack, 1 to ", kMaxStackDepth,
                           " (the kernel's perf_event_max_stack)"));
    }
    if (st.blocked_period_us() > kMaxBlockedPeriodUs) {
      v->Fail(stacks_field("blocked_period_us"),
              absl::StrCat("is ", st.blocked_period_us(), ": at most ", kMaxBlockedPeriodUs,
                           " (1 s); 0 takes every block"));
    }
    if (st.has_max_blocked_threads() &&
        (st.max_blocked_threads() < 1 || st.max_blocked_threads() > kMaxBlockedThreads)) {
      v->Fail(stacks_field("max_blocked_threads"),
              absl::StrCat("is ", st.max_blocked_threads(), ": 1 to ", kMaxBlockedThreads));
    }
    if (st.cpu_hz() > kMaxCpuSampleHz) {
      v->Fail(stacks_field("cpu_hz"), absl::StrCat("is ", st.cpu_hz(), ": at most ",
                                                   kMaxCpuSampleHz, " samples a second per CPU"));
    }
    if (st.blocked() && !b.sched()) {
      v->Fail(stacks_field("blocked"),
              "needs the sched group (bpf_config.sched), whose switch records the stacks");
    } else if (CpuSampleHz(st) > 0 && !b.sched()) {
      v->Fail(stacks_field("cpu_hz"),
              "needs the sched group (bpf_config.sched), which holds the sampling program; "
              "cpu_hz: 0 turns sampling off");
    }
  }
  if (b.filter_container_id_size() + b.filter_cgroup_path_size() > kMaxCgroupFilterValues) {
    v->Fail(field("filter_container_id"),
            absl::StrCat("and filter_cgroup_path give ",
                         b.filter_container_id_size() + b.filter_cgroup_path_size(),
                         " values: at most ", kMaxCgroupFilterValues, " together"));
  }
}

}  // namespace

void CheckDataSource(const config::TraceConfig& cfg, int i, const MachineLimits& machine,
                     Validator* v) {
  const config::DataSourceConfig& ds = cfg.data_sources(i).config();
  const FieldPath at = {{"data_sources", i}, {"config", -1}};
  if (std::find(KnownDataSources().begin(), KnownDataSources().end(), ds.name()) ==
      KnownDataSources().end()) {
    v->Fail(Child(at, "name"), absl::StrCat("'", ds.name(), "' is not a data source; known: ",
                                            absl::StrJoin(KnownDataSources(), ", ")));
  }
  if (ds.target_buffer() >= static_cast<uint32_t>(cfg.buffers_size())) {
    v->Fail(Child(at, "target_buffer"),
            absl::StrCat("is ", ds.target_buffer(), " but there are only ", cfg.buffers_size(),
                         " buffers: an index from 0 to ", cfg.buffers_size() - 1));
  }
  // Two sources of one name into one buffer record the same kernel events
  // twice (each loads its own programs, or its own tracefs instance).
  for (int j = 0; j < i; j++) {
    const config::DataSourceConfig& other = cfg.data_sources(j).config();
    if (other.name() == ds.name() && other.target_buffer() == ds.target_buffer()) {
      v->Fail(Child(at, "name"),
              absl::StrCat("'", ds.name(), "' also writes into buffers[", ds.target_buffer(),
                           "], as data_sources[", j,
                           "] does: one data source of a name per buffer; merge the two"));
      break;
    }
  }
  if (ds.name() == "linux.ftrace") CheckFtraceConfig(ds.ftrace_config(), at, machine, v);
  if (ds.name() == "linux.sys_stats") CheckSysStatsConfig(ds.sys_stats_config(), at, v);
  if (ds.name() == "linux.process_stats") {
    CheckProcessStatsConfig(ds.process_stats_config(), at, v);
  }
  if (ds.name() == "linux.bpf") {
    CheckBpfConfig(ds.bpf_config(), at, machine, v);
    const config::BpfConfig::Stacks& st = ds.bpf_config().stacks();
    if (ds.bpf_config().has_stacks() && (st.blocked() || CpuSampleHz(st) > 0) &&
        cfg.has_durable_buffer_size_kb() && cfg.durable_buffer_size_kb() == 0) {
      v->Fail(Child(Child(at, "bpf_config"), "stacks"),
              "needs the durable store, which keeps the frames and names its samples refer "
              "to: durable_buffer_size_kb is 0");
    }
  }
}

// A buffer no source writes into stays empty and takes its memory for
// nothing; a config without sources (triggers only, tests) is left be.
void CheckEveryBufferIsWritten(const config::TraceConfig& cfg, Validator* v) {
  for (int i = 0; i < cfg.buffers_size() && cfg.data_sources_size() > 0; i++) {
    const bool written =
        std::any_of(cfg.data_sources().begin(), cfg.data_sources().end(),
                    [i](const config::TraceConfig::DataSource& ds) {
                      return ds.config().target_buffer() == static_cast<uint32_t>(i);
                    });
    if (!written) {
      v->Fail({{"buffers", i}}, absl::StrCat("is the target_buffer of no data source, so it "
                                             "would stay empty: point a data source at it "
                                             "(target_buffer: ",
                                             i, ") or remove it"));
    }
  }
}

}  // namespace ringside::agent::internal
