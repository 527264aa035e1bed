#include "agent/daemon/trigger_dispatcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/config/defaults.h"
#include "agent/daemon/internal/replies.h"

namespace ringside::agent {

TriggerDispatcher::TriggerDispatcher(TriggerTally* tally, AgentLog* log, std::function<void()> wake)
    : tally_(*tally), log_(*log), wake_(std::move(wake)) {}

void TriggerDispatcher::ReplaceTriggers(const config::TraceConfig& config) {
  policy_.Replace(TriggerPolicy::RulesFrom(config));
}

TriggerDispatcher::Fired TriggerDispatcher::Fire(const std::string& name,
                                                 const SnapshotTrigger& trigger,
                                                 const std::string& who) {
  // Already fired and waiting for its stop_delay_ms: this one coalesces
  // into that snapshot (so the pending ones are at most one per trigger),
  // and counts as suppressed: it gets no snapshot of its own.
  for (auto& [when, pending] : delayed_) {
    if (pending.trigger.name != name) continue;
    joined_++;
    tally_.Count(name, TriggerTally::Outcome::kJoined);
    // The trigger itself and the list count toward the file's limit.
    if (pending.joined.size() + 1 < kMaxTriggersListedPerSnapshot) {
      pending.joined.push_back(trigger);
    }
    log_.LogLimited(LogLevel::kInfo, absl::StrCat("trigger ", name),
                    absl::StrCat("trigger ", name, " from ", who,
                                 " joins the snapshot it already has pending"));
    return {Fired::kJoined, TriggerPolicy::Verdict::kFire, when};
  }
  const TriggerPolicy::Verdict verdict = policy_.Offer(name, absl::Now());
  if (verdict == TriggerPolicy::Verdict::kUnknown) return {Fired::kUnknown, verdict, std::nullopt};
  if (verdict != TriggerPolicy::Verdict::kFire) {
    tally_.Count(name, TriggerTally::Outcome::kSuppressed);
    log_.LogLimited(LogLevel::kInfo, absl::StrCat("trigger ", name),
                    absl::StrCat("trigger ", name, " from ", who, " suppressed (",
                                 TriggerPolicy::VerdictName(verdict), ")"));
    return {Fired::kSuppressed, verdict, std::nullopt};
  }
  const absl::Duration delay = policy_.Find(name)->stop_delay;
  log_.Info(absl::StrCat("trigger ", name, " from ", who, ": a snapshot in ",
                         absl::FormatDuration(delay)));
  const absl::Time due = absl::Now() + delay;
  delayed_.emplace(due, Due{trigger, {}});
  wake_();
  return {Fired::kQueued, verdict, due};
}

void TriggerDispatcher::OnIncident(const Incident& incident) {
  const std::string detail = IncidentDetail(incident);
  // A stall's log line is its detail; the others' keep the words they have
  // always had (what people grep their logs for).
  const bool stall =
      incident.kind == Incident::Kind::kBlocked || incident.kind == Incident::Kind::kRunqueueDelay;
  const std::string who = absl::StrCat(
      "the kernel (",
      stall ? detail
            : absl::StrCat(IncidentKindName(incident.kind),
                           incident.signal != 0 ? absl::StrCat(" ", incident.signal) : "",
                           " of pid ", incident.pid,
                           incident.comm.empty() ? "" : absl::StrCat(" ", incident.comm)),
      ")");
  // From a source's reader thread, while the agent may be stopping.
  if (closed_) {
    log_.LogLimited(LogLevel::kInfo, "incident while stopping",
                    absl::StrCat(who, ": not a trigger, the agent is stopping"));
    return;
  }
  for (const std::string& name : policy_.RulesFor(incident)) {
    // The kernel is the producer; its time is the incident's own.
    Fire(name, SnapshotTrigger{name, "linux.bpf", 0, incident.boottime_ns, detail}, who);
  }
}

void TriggerDispatcher::FireFromTheKernel(const std::string& name, const char* producer,
                                          int64_t boottime_ns, const std::string& detail) {
  const std::string who = absl::StrCat("the kernel (", detail, ")");
  if (closed_) {
    log_.LogLimited(LogLevel::kInfo, absl::StrCat(producer, " while stopping"),
                    absl::StrCat(who, ": not a trigger, the agent is stopping"));
    return;
  }
  const Fired fired = Fire(name, SnapshotTrigger{name, producer, 0, boottime_ns, detail}, who);
  if (fired.kind == Fired::kUnknown) {
    log_.LogLimited(LogLevel::kWarning, absl::StrCat(producer, " ", name),
                    absl::StrCat(who, ": trigger ", name,
                                 " is no longer in trigger_config (a reload removed it); the "
                                 "kernel is watched for it until the agent restarts"));
  }
}

void TriggerDispatcher::OnPressure(const PressureEvent& event) {
  FireFromTheKernel(event.trigger, "psi", event.boottime_ns, event.detail);
}

void TriggerDispatcher::OnEventHit(const EventHit& hit) {
  FireFromTheKernel(hit.trigger, "ftrace", hit.boottime_ns, hit.detail);
}

std::vector<TriggerDispatcher::Due> TriggerDispatcher::TakeDue(absl::Time now, absl::Time* next) {
  std::vector<Due> due;
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    due.push_back(std::move(delayed_.begin()->second));
    delayed_.erase(delayed_.begin());
  }
  *next = delayed_.empty() ? absl::InfiniteFuture() : delayed_.begin()->first;
  return due;
}

void TriggerDispatcher::Close() {
  closed_ = true;
  std::multimap<absl::Time, Due> now_due;
  for (auto& [when, delayed] : delayed_) now_due.emplace(absl::InfinitePast(), std::move(delayed));
  delayed_.swap(now_due);
}

uint64_t TriggerDispatcher::suppressed() const { return policy_.counts().suppressed + joined_; }

control::Reply TriggerReply(const std::string& name, const TriggerDispatcher::Fired& fired,
                            const std::string& output_dir, absl::Time now) {
  switch (fired.kind) {
    case TriggerDispatcher::Fired::kUnknown:
      return internal::Error(absl::StrCat("no trigger named '", name, "' in trigger_config"));
    case TriggerDispatcher::Fired::kSuppressed:
      return internal::Error(absl::StrCat(
          "trigger '", name, "' suppressed: ", TriggerPolicy::VerdictName(fired.verdict),
          "; counted in status"));
    case TriggerDispatcher::Fired::kQueued:
    case TriggerDispatcher::Fired::kJoined:
      break;
  }
  control::Reply reply;
  control::TriggerReply* answer = reply.mutable_trigger();
  answer->set_joined(fired.kind == TriggerDispatcher::Fired::kJoined);
  if (fired.due.has_value()) {
    answer->set_delay_ms(
        static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Milliseconds(*fired.due - now))));
  }
  answer->set_output_dir(output_dir);
  return reply;
}

std::vector<std::string> IncidentTriggerWarnings(const config::TraceConfig& config,
                                                 const TracingSession::Report& report) {
  // Incidents come from linux.bpf's incident programs, or from a
  // linux.ftrace source's events in their place.
  bool enabled = false;
  for (const auto& ds : config.data_sources()) {
    enabled |= ds.config().name() == "linux.bpf" && ds.config().bpf_config().incidents();
  }
  bool bpf_running = false, ftrace = false;
  for (const TracingSession::SourceReport& r : report.sources) {
    bpf_running |=
        r.name == "linux.bpf" && r.state == TracingSession::SourceReport::State::kRunning;
    ftrace |= r.name == "linux.ftrace";
  }
  std::vector<std::string> warnings;
  for (const auto& t : config.trigger_config().triggers()) {
    if (!t.has_incident()) continue;
    warnings.push_back(absl::StrCat(
        "trigger ", t.name(), ": no incident reaches its incident filter: linux.bpf's incident ",
        "programs ",
        !enabled      ? "are off in this config (bpf_config.incidents)"
        : bpf_running ? "cannot run on this kernel"
                      : "are not running",
        ", and ",
        ftrace ? "the linux.ftrace source cannot report them (no tracefs, or no oom/mark_victim "
                 "and signal/signal_deliver events)"
               : "this config has no linux.ftrace source to report them",
        "; it answers requests by name only"));
  }
  return warnings;
}

std::vector<PressureRule> PressureRulesOf(const config::TraceConfig& config) {
  using Pressure = config::TraceConfig::TriggerConfig::Trigger::Pressure;
  std::vector<PressureRule> rules;
  for (const auto& t : config.trigger_config().triggers()) {
    if (!t.has_pressure()) continue;
    const Pressure& p = t.pressure();
    PressureRule r;
    r.trigger = t.name();
    r.resource = p.resource() == Pressure::CPU  ? "cpu"
                 : p.resource() == Pressure::IO ? "io"
                                                : "memory";
    r.full = p.full();
    r.stall_us = p.stall_ms() * 1000;
    r.window_us = (p.has_window_ms() ? p.window_ms() : kDefaultPressureWindowMs) * 1000;
    r.cgroups.assign(p.cgroups().begin(), p.cgroups().end());
    rules.push_back(std::move(r));
  }
  return rules;
}

std::vector<EventRule> EventRulesOf(const config::TraceConfig& config) {
  std::vector<EventRule> rules;
  for (const auto& t : config.trigger_config().triggers()) {
    if (t.has_event()) rules.push_back({t.name(), t.event().event(), t.event().filter()});
  }
  return rules;
}

}  // namespace ringside::agent
