#include "agent/daemon/trigger_dispatcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

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
  const std::string who = absl::StrCat(
      "the kernel (", IncidentKindName(incident.kind),
      incident.signal != 0 ? absl::StrCat(" ", incident.signal) : "", " of pid ", incident.pid,
      incident.comm.empty() ? "" : absl::StrCat(" ", incident.comm), ")");
  // From a source's reader thread, while the agent may be stopping.
  if (closed_) {
    log_.LogLimited(LogLevel::kInfo, "incident while stopping",
                    absl::StrCat(who, ": not a trigger, the agent is stopping"));
    return;
  }
  for (const std::string& name : policy_.RulesFor(incident)) {
    // The kernel is the producer; its time is the incident's own.
    Fire(name, SnapshotTrigger{name, "linux.bpf", 0, incident.boottime_ns}, who);
  }
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

}  // namespace ringside::agent
