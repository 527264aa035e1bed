#include "agent/daemon/agent_status.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/daemon/agent_memory.h"
#include "agent/session/session_snapshot.h"
#include "agent/snapshots/snapshot_retention.h"
#include "base/version.h"

namespace ringside::agent {
namespace {

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

double FillPercent(const TracingSession::BufferReport& b) {
  return b.stats.buffer_size
             ? 100.0 * static_cast<double>(b.used_bytes) / static_cast<double>(b.stats.buffer_size)
             : 0;
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

control::SourceStatus::State StateOf(TracingSession::SourceReport::State s) {
  switch (s) {
    case TracingSession::SourceReport::State::kRunning:
      return control::SourceStatus::RUNNING;
    case TracingSession::SourceReport::State::kStopped:
      return control::SourceStatus::STOPPED;
    case TracingSession::SourceReport::State::kFailed:
      return control::SourceStatus::FAILED;
  }
  return control::SourceStatus::STATE_UNSPECIFIED;
}

// `status`'s snapshots: the writer's stats, and what became of each
// trigger's requests.
void SetStacks(const DataSource::StackReport& r, control::StackStatus* out) {
  out->set_blocked_samples(r.blocked_samples);
  out->set_cpu_samples(r.cpu_samples);
  out->set_frames_named(r.frames_named);
  out->set_frames_unnamed(r.frames_unnamed);
  out->set_callstacks(r.callstacks);
  out->set_interned_bytes(r.interned_bytes);
  out->set_generations(r.generations);
  out->set_remembered_stacks(r.remembered_stacks);
  out->set_symbol_bytes(r.symbol_bytes);
  out->set_interning_bytes(r.interning_bytes);
  out->set_blocked_period_ns(r.blocked_period_ns);
  out->set_blocked_at_switch(r.blocked_at_switch);
  out->set_blocked_unsampled(r.blocked_unsampled);
  out->set_blocked_unsampled_ns(r.blocked_unsampled_ns);
  out->set_user_frames_unmapped(r.user_frames_unmapped);
  out->set_maps_reads(r.maps_reads);
  out->set_maps_unreadable(r.maps_unreadable);
  out->set_binaries_unreadable(r.binaries_unreadable);
}

void SetSnapshots(const SnapshotWriter::Stats& snapshots, uint64_t suppressed,
                  const AgentStatus::Triggers& triggers, control::SnapshotStatus* out) {
  out->set_count(snapshots.written);
  out->set_last_path(snapshots.last_path);
  out->set_last_reason(snapshots.last_reason);
  out->set_suppressed(suppressed);
  out->set_failed(snapshots.failed);
  out->set_last_error(snapshots.last_error);
  if (snapshots.codec != PacketCodec::kNone) out->set_codec(PacketCodecName(snapshots.codec));
  out->set_compressed_in_bytes(snapshots.compressed_in_bytes);
  out->set_compressed_out_bytes(snapshots.compressed_out_bytes);
  out->set_compression_cpu_ns(snapshots.compression_cpu_ns);
  out->set_sidecars_failed(snapshots.sidecars_failed);
  out->set_last_sidecar_error(snapshots.last_sidecar_error);
  for (const TriggerTally::Counts& c : triggers.counts) {
    control::SnapshotStatus::Trigger* t = out->add_triggers();
    t->set_name(c.name);
    // Requests by hand are all one row, whatever their reasons; every name
    // but that one, SIGUSR1's, the previous boot's and the tally's overflow
    // row is a config's trigger (the running config's, or one a reload
    // removed).
    t->set_kind(triggers.configured.count(c.name) > 0 ? "config"
                : c.name == kRequestedSnapshotReason  ? "request"
                : c.name == kSignalSnapshotReason     ? "signal"
                : c.name == kPreviousBootTrigger      ? "previous_boot"
                : c.name == TriggerTally::kOtherName  ? "other"
                                                      : "config");
    if (auto it = triggers.configured.find(c.name); it != triggers.configured.end()) {
      t->set_fires_on(it->second);
    }
    t->set_fired(c.fired);
    t->set_joined(c.joined);
    t->set_suppressed(c.suppressed);
  }
}

}  // namespace

void SetMemory(const TracingSession::Report& report, const AgentMemory& memory,
               control::MemoryStatus* out) {
  out->set_cgroup(memory.cgroup);
  out->set_cgroup_bytes(memory.cgroup_bytes);
  out->set_cgroup_limit_bytes(memory.cgroup_limit_bytes);
  out->set_cgroup_other_processes(memory.cgroup_other_processes);
  out->set_proportional_bytes(memory.proportional_bytes);
  uint64_t rings = 0, pools = 0, ftrace = 0, buffers = 0, symbols = 0, interning = 0;
  for (const TracingSession::SourceReport& s : report.sources) {
    rings += s.staging.bpf_ring_bytes;
    ftrace += s.staging.ftrace_buffer_bytes;
    pools += s.chunk_pool_bytes;
    symbols += s.stacks.symbol_bytes;
    interning += s.stacks.interning_bytes;
  }
  for (const TracingSession::BufferReport& b : report.buffers) buffers += b.stats.buffer_size;
  if (report.durable.has_value()) buffers += report.durable->capacity;
  out->set_bpf_ring_bytes(rings);
  out->set_chunk_pool_bytes(pools);
  out->set_ftrace_buffer_bytes(ftrace);
  out->set_buffer_bytes(buffers);
  out->set_symbol_bytes(symbols);
  out->set_stack_interning_bytes(interning);
}

AgentStatus::AgentStatus(absl::Time started) : started_(started), last_tick_(started) {}

void AgentStatus::Tick(const TracingSession::Report& report, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const double seconds = absl::ToDoubleSeconds(now - last_tick_);
  for (const TracingSession::SourceReport& s : report.sources) {
    const uint64_t before = last_events_[s.name];
    rates_[s.name] =
        seconds > 0 && s.events >= before ? static_cast<double>(s.events - before) / seconds : 0;
    last_events_[s.name] = s.events;
  }
  last_tick_ = now;
}

std::string AgentStatus::StoppedLine(const TracingSession::Progress& progress,
                                     const SnapshotWriter::Stats& snapshots, absl::Time now) const {
  const absl::Duration up = now - started_;
  return absl::StrCat("stopped after ",
                      absl::FormatDuration(absl::Trunc(
                          up, up < absl::Seconds(1) ? absl::Milliseconds(1) : absl::Seconds(1))),
                      ": ", progress.events, " events recorded, ", progress.events_lost,
                      " lost before the buffers; ", snapshots.written, " snapshots written",
                      snapshots.failed ? absl::StrCat(", ", snapshots.failed, " failed") : "");
}

std::string AgentStatus::HealthLine(const TracingSession::Report& report,
                                    uint64_t snapshots_written) const {
  std::vector<std::string> parts;
  uint64_t lost = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const TracingSession::SourceReport& s : report.sources) {
      if (s.state == TracingSession::SourceReport::State::kFailed) {
        parts.push_back(absl::StrCat(s.name, " failed"));
      } else {
        const auto rate = rates_.find(s.name);
        parts.push_back(
            absl::StrFormat("%s %.0f events/s", s.name, rate != rates_.end() ? rate->second : 0.0));
      }
      for (const DataSource::Loss& l : s.losses) lost += l.events;
    }
  }
  for (const TracingSession::BufferReport& b : report.buffers) {
    parts.push_back(
        absl::StrFormat("buffer %s %.0f%% full", Mib(b.stats.buffer_size), FillPercent(b)));
  }
  parts.push_back(absl::StrCat(snapshots_written, " snapshots"));
  parts.push_back(absl::StrCat(lost, " events lost"));
  return absl::StrJoin(parts, "; ");
}

control::StatusReply AgentStatus::Reply(const TracingSession::Report& report, absl::Time now,
                                        const std::string& config_path,
                                        const SnapshotWriter::Stats& snapshots, uint64_t suppressed,
                                        const Triggers& triggers) const {
  control::StatusReply st;
  st.set_uptime_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(now - started_)));
  st.set_config_path(config_path);
  AddSources(report, now, &st);
  for (const TracingSession::BufferReport& b : report.buffers) {
    control::BufferStatus* out = st.add_buffers();
    out->set_size_bytes(b.stats.buffer_size);
    out->set_bytes_written(b.stats.bytes_written);
    out->set_bytes_overwritten(b.stats.bytes_overwritten);
    out->set_write_wraps(b.stats.write_wrap_count);
    out->set_fill_percent(FillPercent(b));
  }
  if (report.durable.has_value()) {
    control::DurableStatus* d = st.mutable_durable();
    d->set_entries(report.durable->entries);
    d->set_bytes(report.durable->bytes);
    d->set_capacity(report.durable->capacity);
    d->set_evicted_live(report.durable->evicted_live);
    d->set_evicted_ended(report.durable->evicted_ended);
  }
  SetSnapshots(snapshots, suppressed, triggers, st.mutable_snapshots());
  st.set_cpu_seconds(CpuSeconds());
  st.set_rss_bytes(ResidentBytes());
  SetMemory(report, ReadAgentMemory(), st.mutable_memory());
  st.set_pid(getpid());
  st.set_version(base::kVersion);
  return st;
}

void AgentStatus::AddSources(const TracingSession::Report& report, absl::Time now,
                             control::StatusReply* st) const {
  absl::MutexLock lock(&mu_);
  const double uptime_s = absl::ToDoubleSeconds(now - started_);
  for (const TracingSession::SourceReport& s : report.sources) {
    control::SourceStatus* out = st->add_sources();
    out->set_name(s.name);
    out->set_state(StateOf(s.state));
    out->set_error(s.error);
    out->set_events(s.events);
    // Before the first health period: the rate since the start.
    const auto rate = rates_.find(s.name);
    out->set_events_per_s(rate != rates_.end() ? rate->second
                          : uptime_s > 0       ? static_cast<double>(s.events) / uptime_s
                                               : 0);
    out->set_reader_cpu_seconds(absl::ToDoubleSeconds(s.consumer.cpu));
    out->set_reader_paused_seconds(absl::ToDoubleSeconds(s.consumer.paused));
    for (const DataSource::Loss& l : s.losses) {
      control::SourceStatus::Loss* loss = out->add_losses();
      loss->set_cpu(static_cast<int32_t>(l.cpu));
      loss->set_kind(l.kind);
      loss->set_events(l.events);
    }
    if (s.stacks.recorded) SetStacks(s.stacks, out->mutable_stacks());
  }
}

}  // namespace ringside::agent
