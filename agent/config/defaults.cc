#include "agent/config/defaults.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include <bpf/libbpf.h>

namespace ringside::agent {

namespace {

uint64_t Clamp(uint64_t v, uint64_t lo, uint64_t hi) { return std::min(std::max(v, lo), hi); }

// The largest power of two no larger than `v` (v >= 1).
uint64_t PowerOfTwoFloor(uint64_t v) {
  uint64_t p = 1;
  while (p <= v / 2) p <<= 1;
  return p;
}

}  // namespace

FtraceShare FtraceShareOf(const config::TraceConfig& config) {
  FtraceShare share = FtraceShare::kAlone;
  for (const config::TraceConfig::DataSource& ds : config.data_sources()) {
    const config::DataSourceConfig& c = ds.config();
    if (c.name() != "linux.bpf") continue;
    if (c.bpf_config().sched()) return FtraceShare::kBesideBpfScheduling;
    share = FtraceShare::kBesideBpf;
  }
  return share;
}

StagingShares StagingSharesFor(uint64_t budget_kb, int cpus, FtraceShare ftrace_share,
                               size_t chunk_size) {
  StagingShares s = StagingSharesFor(budget_kb, cpus, ftrace_share);
  const uint64_t n = static_cast<uint64_t>(std::max(cpus, 1));
  const uint64_t pool_chunks = budget_kb * 1024 / 32 / std::max<size_t>(chunk_size, 1);
  s.chunk_pool_chunks = static_cast<uint32_t>(std::min<uint64_t>(
      std::max<uint64_t>(pool_chunks, 4 * n), std::numeric_limits<uint32_t>::max()));
  return s;
}

StagingShares StagingSharesFor(uint64_t budget_kb, int cpus, FtraceShare ftrace_share) {
  const uint64_t n = static_cast<uint64_t>(std::max(cpus, 1));
  const uint64_t page_kb =
      std::max<uint64_t>(1, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024);
  StagingShares s;
  s.bpf_ring_kb = static_cast<uint32_t>(std::max(
      page_kb,
      PowerOfTwoFloor(Clamp(budget_kb / 2 / n, kMinBpfRingSizeKb, kMaxDefaultBpfRingSizeKb))));
  const bool beside_scheduling = ftrace_share == FtraceShare::kBesideBpfScheduling;
  const uint64_t quarters = beside_scheduling ? 1 : ftrace_share == FtraceShare::kBesideBpf ? 2 : 3;
  const uint64_t ftrace_kb = budget_kb / 4 * quarters / n;
  s.ftrace_buffer_kb =
      static_cast<uint32_t>(Clamp(ftrace_kb, kMinFtraceBufferSizeKb,
                                  beside_scheduling ? kMaxDefaultFtraceBufferSizeKb
                                                    : kMaxDefaultFtraceAloneBufferSizeKb) /
                            kBufferPageKb * kBufferPageKb);
  return s;
}

int PossibleCpus() {
  const int n = libbpf_num_possible_cpus();
  return n > 0 ? n : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_CONF)));
}

void ApplyDefaults(config::TraceConfig* config) { ApplyDefaults(config, PossibleCpus()); }

void ApplyDefaults(config::TraceConfig* config, int cpus) {
  for (config::TraceConfig::BufferConfig& b : *config->mutable_buffers()) {
    const uint64_t kb = b.size_kb();
    if (kb % kBufferPageKb != 0 && kb < UINT32_MAX - kBufferPageKb) {
      b.set_size_kb(static_cast<uint32_t>((kb / kBufferPageKb + 1) * kBufferPageKb));
    }
  }
  if (!config->has_staging_budget_kb()) config->set_staging_budget_kb(kDefaultStagingBudgetKb);
  const StagingShares shares =
      StagingSharesFor(config->staging_budget_kb(), cpus, FtraceShareOf(*config));
  for (config::TraceConfig::DataSource& ds : *config->mutable_data_sources()) {
    config::DataSourceConfig* c = ds.mutable_config();
    if (c->name() == "linux.bpf") {
      config::BpfConfig* b = c->mutable_bpf_config();
      if (b->ring_size_kb() == 0) b->set_ring_size_kb(shares.bpf_ring_kb);
      // The ring the kernel makes: a power of two number of pages.
      uint64_t ring_kb = std::max<uint64_t>(1, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024);
      while (ring_kb < b->ring_size_kb()) ring_kb <<= 1;
      if (ring_kb <= UINT32_MAX) b->set_ring_size_kb(static_cast<uint32_t>(ring_kb));
      if (b->drain_period_ms() == 0) b->set_drain_period_ms(kDefaultBpfDrainPeriodMs);
    } else if (c->name() == "linux.ftrace") {
      config::FtraceConfig* f = c->mutable_ftrace_config();
      if (f->buffer_size_kb() == 0) f->set_buffer_size_kb(shares.ftrace_buffer_kb);
      if (f->drain_period_ms() == 0) f->set_drain_period_ms(kDefaultFtraceDrainPeriodMs);
      if (f->drain_buffer_percent() == 0) {
        f->set_drain_buffer_percent(kDefaultFtraceDrainBufferPercent);
      }
      if (!f->compact_sched().has_enabled()) {
        f->mutable_compact_sched()->set_enabled(kDefaultFtraceCompactSched);
      }
    } else if (c->name() == "linux.process_stats") {
      config::ProcessStatsConfig* ps = c->mutable_process_stats_config();
      if (!ps->has_proc_stats_poll_ms()) ps->set_proc_stats_poll_ms(kDefaultProcStatsPollMs);
      if (!ps->has_min_rss_kb()) ps->set_min_rss_kb(kDefaultProcStatsMinRssKb);
    } else if (c->name() == "linux.sys_stats") {
      config::SysStatsConfig* st = c->mutable_sys_stats_config();
      if (!st->has_meminfo_period_ms() && !st->has_vmstat_period_ms() &&
          !st->has_stat_period_ms() && !st->has_psi_period_ms()) {
        st->set_meminfo_period_ms(kDefaultSysStatsPeriodMs);
        st->set_vmstat_period_ms(kDefaultSysStatsPeriodMs);
        st->set_stat_period_ms(kDefaultSysStatsPeriodMs);
        st->set_psi_period_ms(kDefaultSysStatsPeriodMs);
      }
    }
  }
  if (config->write_into_file() && config->file_write_period_ms() == 0) {
    config->set_file_write_period_ms(kDefaultFileWritePeriodMs);
  }
  if (config->has_trigger_config()) {
    for (config::TraceConfig::TriggerConfig::Trigger& t :
         *config->mutable_trigger_config()->mutable_triggers()) {
      if (!t.has_cooldown_ms()) t.set_cooldown_ms(kDefaultTriggerCooldownMs);
      if (!t.has_incident()) continue;
      auto* incident = t.mutable_incident();
      const bool fatal_signal =
          std::find(incident->kinds().begin(), incident->kinds().end(),
                    config::TraceConfig::TriggerConfig::Trigger::Incident::FATAL_SIGNAL) !=
          incident->kinds().end();
      if (fatal_signal && incident->signals_size() == 0) {
        for (int32_t sig : kDefaultCrashSignals) incident->add_signals(sig);
      }
    }
  }
  if (!config->has_durable_buffer_size_kb()) {
    config->set_durable_buffer_size_kb(kDefaultDurableBufferSizeKb);
  }
  const bool needs_flushes = config->write_into_file() || config->durable_buffer_size_kb() > 0;
  if (needs_flushes && !config->has_flush_period_ms()) {
    config->set_flush_period_ms(kDefaultFlushPeriodMs);
  }
}

void ApplyAgentDefaults(config::TraceConfig* config) {
  if (!config->has_output_dir()) config->set_output_dir(kDefaultOutputDir);
  if (!config->has_control_socket()) config->set_control_socket(kDefaultControlSocket);
  if (!config->has_max_consumer_cpu_percent()) {
    config->set_max_consumer_cpu_percent(kDefaultAgentConsumerCpuPercent);
  }
  if (!config->has_max_snapshot_files() && !config->has_max_snapshot_bytes()) {
    config->set_max_snapshot_files(kDefaultMaxSnapshotFiles);
  }
  if (!config->has_snapshot_request_cooldown_ms()) {
    config->set_snapshot_request_cooldown_ms(kDefaultSnapshotRequestCooldownMs);
  }
  if (!config->has_max_snapshot_requests_per_hour()) {
    config->set_max_snapshot_requests_per_hour(kDefaultMaxSnapshotRequestsPerHour);
  }
  if (config->has_metrics_textfile() && !config->has_metrics_period_ms()) {
    config->set_metrics_period_ms(kDefaultMetricsPeriodMs);
  }
  if (config->write_into_file()) {
    if (!config->has_max_file_size_bytes() && !config->has_file_rotation_period_ms()) {
      config->set_max_file_size_bytes(kDefaultStreamFileBytes);
      config->set_file_rotation_period_ms(kDefaultStreamRotationPeriodMs);
    }
    if (!config->has_max_files() && !config->has_max_total_bytes()) {
      config->set_max_total_bytes(kDefaultStreamTotalBytes);
    }
  }
}

}  // namespace ringside::agent
