#ifndef RINGSIDE_AGENT_DAEMON_TRIGGER_DISPATCHER_H_
#define RINGSIDE_AGENT_DAEMON_TRIGGER_DISPATCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/session/tracing_session.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/snapshots/trigger_policy.h"
#include "agent/snapshots/trigger_tally.h"
#include "agent/sources/event_watch.h"
#include "agent/sources/incident.h"
#include "agent/sources/pressure_watch.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's triggers from their fire to their snapshot. A trigger named
// in a request (`ringside trigger`) or passed by an incident is offered to
// the config's TriggerPolicy; a fire waits for its stop_delay_ms, and the
// same trigger's fires meanwhile join it (so that each trigger has at most
// one snapshot pending) instead of being offered again. The main thread
// takes the pending snapshots once due (TakeDue()) and takes them.
//
//   Fire("oom")  ──► policy ──► pending until now + stop_delay ──► TakeDue()
//   Fire("oom")  ──► joins the pending one (counted as suppressed)
//
// Counts every outcome into the tally, and logs the fires, joins and
// suppressions (rate-limited per trigger).
//
// Not thread-safe, as TriggerPolicy: the caller serialises calls.
// AgentService makes them under its mu_, from the control thread (fires by
// name, status), a source's reader thread (incidents) and the main thread
// (what is due, reloads, shutdown).
class TriggerDispatcher {
 public:
  // `tally`, `log`: outlive it. `wake`: called (in Fire() or OnIncident())
  // when a fire starts waiting for its delay, so that the main thread asks
  // TakeDue() again. Starts with no trigger: ReplaceTriggers() gives it
  // the config's.
  TriggerDispatcher(TriggerTally* tally, AgentLog* log, std::function<void()> wake);

  // The rules of `config.trigger_config` (start, and a reload that changed
  // it); see TriggerPolicy::Replace for what a rule keeps.
  void ReplaceTriggers(const config::TraceConfig& config);

  struct Fired {
    enum Kind { kQueued, kJoined, kUnknown, kSuppressed };
    Kind kind;
    // The policy's verdict: kFire for kQueued and kJoined.
    TriggerPolicy::Verdict verdict;
    // kQueued, kJoined: when the pending snapshot is due.
    std::optional<absl::Time> due;
  };
  // The trigger `name` fired by `who` (for the log), `trigger` as the file
  // is to list it: joins its pending snapshot, or is offered to the policy
  // and, on a fire, waits for its stop_delay_ms.
  Fired Fire(const std::string& name, const SnapshotTrigger& trigger, const std::string& who);

  // The triggers whose incident filter `incident` passes fire as a request
  // by name would, by the kernel. After Close(), none does (logged).
  void OnIncident(const Incident& incident);
  // The kernel said a pressure trigger's threshold was crossed: fires it
  // as a request by name would, its detail in the file. After Close(), or
  // when a reload removed the trigger, nothing fires (logged).
  void OnPressure(const PressureEvent& event);
  // An event passed an event trigger's filter: the same, its detail the
  // event as ftrace prints it.
  void OnEventHit(const EventHit& hit);

  // A fire whose delay has passed, and the fires of the same trigger that
  // joined it meanwhile (at most kMaxTriggersListedPerSnapshot listed with
  // it; all counted in the tally).
  struct Due {
    SnapshotTrigger trigger;
    std::vector<SnapshotTrigger> joined;
  };
  // Takes the fires due at `now`, earliest first; `*next` is when the next
  // one is due (InfiniteFuture when none waits).
  std::vector<Due> TakeDue(absl::Time now, absl::Time* next);

  // Shutdown: every fire still waiting is due at once, and incidents fire
  // nothing any more (a fire from here on would wait for a snapshot never
  // taken). Requests by name still do: the control socket stops taking
  // them first.
  void Close();

  // Fires that made no snapshot of their own: suppressed by the policy, or
  // joined to a pending one.
  uint64_t suppressed() const;

 private:
  // A trigger the kernel fired (`producer`: "psi", "ftrace").
  void FireFromTheKernel(const std::string& name, const char* producer, int64_t boottime_ns,
                         const std::string& detail);

  TriggerTally& tally_;
  AgentLog& log_;
  const std::function<void()> wake_;

  TriggerPolicy policy_{{}};
  // The fires waiting for their stop_delay_ms, by when they are due.
  std::multimap<absl::Time, Due> delayed_;
  // Fires that joined a pending snapshot of theirs.
  uint64_t joined_ = 0;
  bool closed_ = false;
};

// `ringside trigger NAME`'s answer to `fired`: an error naming why nothing
// fires (no such trigger, or the policy's verdict), else whether it joined
// a pending snapshot, its delay from `now`, and `output_dir`, where the
// snapshot goes.
control::Reply TriggerReply(const std::string& name, const TriggerDispatcher::Fired& fired,
                            const std::string& output_dir, absl::Time now);

// One warning per trigger of `config` with an incident filter, when no
// source of `report` reports incidents (the caller asks only then): why
// (linux.bpf's incident programs off, or not running; no linux.ftrace
// source to report them instead), and that it answers requests by name only.
std::vector<std::string> IncidentTriggerWarnings(const config::TraceConfig& config,
                                                 const TracingSession::Report& report);

// The pressure rules of `config`'s triggers, for the PressureWatch; its
// event rules, for the EventWatch.
std::vector<PressureRule> PressureRulesOf(const config::TraceConfig& config);
std::vector<EventRule> EventRulesOf(const config::TraceConfig& config);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_TRIGGER_DISPATCHER_H_
