#include "agent/daemon/kernel_triggers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/descriptors/cgroup_fs.h"

namespace ringside::agent {
namespace {

// How often a cgroup still to come (or removed) is looked for again.
constexpr absl::Duration kCgroupRetryPeriod = absl::Seconds(5);

}  // namespace

void KernelReports::OnIncident(const Incident& incident) {
  absl::MutexLock lock(&mu_);
  triggers_.OnIncident(incident);
}

void KernelReports::OnPressure(const PressureEvent& event) {
  absl::MutexLock lock(&mu_);
  triggers_.OnPressure(event);
}

void KernelReports::OnEventHit(const EventHit& hit) {
  absl::MutexLock lock(&mu_);
  triggers_.OnEventHit(hit);
}

void KernelTriggers::Start(const config::TraceConfig& config, PressureListener* pressure,
                           EventListener* events, AgentLog& log) {
  started_ = true;
  pressure_rules_ = PressureRulesOf(config);
  event_rules_ = EventRulesOf(config);
  stalls_ = StallsOf(config);
  blocked_thresholds_ = BlockedThresholdsOf(config);
  if (!pressure_rules_.empty()) {
    absl::StatusOr<std::unique_ptr<PressureWatch>> watch = PressureWatch::Start(
        pressure_rules_, pressure,
        {.proc = "/proc", .cgroup2_mount = Cgroup2Mount(), .retry_period = kCgroupRetryPeriod});
    if (watch.ok()) {
      pressure_ = std::move(*watch);
      LogNewWarnings(log);
    } else {
      log.Error(absl::StrCat("the pressure triggers cannot be watched: ", watch.status().message(),
                             "; they answer requests by name only"));
    }
  }
  if (!event_rules_.empty()) {
    absl::StatusOr<std::unique_ptr<EventWatch>> watch = EventWatch::Start(event_rules_, events);
    if (watch.ok()) {
      events_ = std::move(*watch);
      for (const std::string& w : events_->warnings()) log.Warning(w);
    } else {
      log.Error(absl::StrCat("the event triggers cannot be watched: ", watch.status().message(),
                             "; they answer requests by name only"));
    }
  }
}

void KernelTriggers::LogNewWarnings(AgentLog& log) {
  if (pressure_ == nullptr) return;
  for (const std::string& w : pressure_->TakeWarnings()) log.Warning(w);
}

void KernelTriggers::CheckReload(const config::TraceConfig& config, AgentLog& log) const {
  // Start() gives the triggers their first config before this one starts.
  if (!started_) return;
  if (PressureRulesOf(config) != pressure_rules_) {
    log.Warning(
        "trigger_config: the pressure thresholds changed; the running ones stay until the agent "
        "restarts (the kernel takes them while the agent still has its privileges, at start)");
  }
  if (EventRulesOf(config) != event_rules_) {
    log.Warning(
        "trigger_config: the event triggers changed; the running ones stay until the agent "
        "restarts (their tracefs instances are made at start)");
  }
  // linux.bpf measures waits for a CPU from the least threshold of the
  // start: a trigger may rise above it, not go below. Blocks are told at
  // each threshold of the start (StallSweep): any change takes a restart.
  const uint64_t runqueue_ns = StallsOf(config).runqueue_ns;
  if (runqueue_ns != 0 && (stalls_.runqueue_ns == 0 || runqueue_ns < stalls_.runqueue_ns)) {
    log.Warning(absl::StrCat(
        "trigger_config: a `runqueue_delay` threshold of ", runqueue_ns / 1'000'000,
        " ms is below ",
        stalls_.runqueue_ns == 0 ? "none, the one linux.bpf measures from"
                                 : absl::StrCat(stalls_.runqueue_ns / 1'000'000,
                                                " ms, the least linux.bpf measures from"),
        ": its shorter waits fire nothing until the agent restarts (the programs take it at "
        "start)"));
  }
  if (BlockedThresholdsOf(config) != blocked_thresholds_) {
    log.Warning(
        "trigger_config: the `blocked` thresholds changed; linux.bpf tells of blocks at the "
        "thresholds of its start until the agent restarts");
  }
}

void KernelTriggers::Stop() {
  pressure_.reset();
  events_.reset();
}

void KernelTriggers::FillStatus(control::StatusReply* reply) const {
  if (!pressure_rules_.empty()) {
    control::PressureStatus* p = reply->mutable_pressure();
    if (pressure_ == nullptr) {
      uint32_t files = 0;
      for (const PressureRule& r : pressure_rules_) {
        files += r.cgroups.empty() ? 1 : static_cast<uint32_t>(r.cgroups.size());
      }
      p->set_waiting(files);
    } else {
      const PressureWatch::Stats s = pressure_->stats();
      p->set_watching(s.watching);
      p->set_waiting(s.waiting);
      p->set_events(s.events);
    }
  }
  if (!event_rules_.empty()) {
    control::EventTriggerStatus* e = reply->mutable_event_triggers();
    if (events_ == nullptr) {
      e->set_failed(static_cast<uint32_t>(event_rules_.size()));
    } else {
      const EventWatch::Stats s = events_->stats();
      e->set_watching(s.watching);
      e->set_failed(s.failed);
      e->set_hits(s.hits);
      e->set_fired(s.fired);
    }
  }
}

}  // namespace ringside::agent
