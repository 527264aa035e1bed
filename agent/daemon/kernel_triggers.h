#ifndef RINGSIDE_AGENT_DAEMON_KERNEL_TRIGGERS_H_
#define RINGSIDE_AGENT_DAEMON_KERNEL_TRIGGERS_H_

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/daemon/trigger_dispatcher.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/sources/bpf_incidents.h"
#include "agent/sources/event_watch.h"
#include "agent/sources/incident.h"
#include "agent/sources/pressure_watch.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// What the kernel reports (incidents, pressure, events) into the agent's
// TriggerDispatcher, under the agent's lock, on the threads that read them
// (a source's reader, the pressure and event watches).
class KernelReports : public IncidentListener, public PressureListener, public EventListener {
 public:
  // `mu` guards `triggers`; both outlive it.
  KernelReports(absl::Mutex* mu, TriggerDispatcher* triggers) : mu_(*mu), triggers_(*triggers) {}
  void OnIncident(const Incident& incident) override;
  void OnPressure(const PressureEvent& event) override;
  void OnEventHit(const EventHit& hit) override;

 private:
  absl::Mutex& mu_;
  TriggerDispatcher& triggers_;
};

// The agent's triggers that the kernel wakes it for, watched from the start
// until the shutdown: the PSI triggers of trigger_config's `pressure`
// thresholds, and the filtered tracepoints of its `event` rules. The kernel
// takes a pressure window from the privileges of whoever opened its file,
// and the event rules take tracefs instances of their own: both are set up
// at start, before the agent drops its privileges, and a reload that
// changes them keeps the running ones (logged: a restart applies it). So
// do the `blocked` thresholds and the least `runqueue_delay` one, which
// linux.bpf takes at load (logged when a reload changes the first, or goes
// below the second).
//
// Start(), LogNewWarnings(), CheckReload() and Stop() on the main thread;
// FillStatus() from any thread until Stop().
class KernelTriggers {
 public:
  // Watches the pressure and event rules of `config`; none: nothing starts.
  // A watch that cannot start, and each rule that cannot be watched, is
  // logged; the agent records on.
  void Start(const config::TraceConfig& config, PressureListener* pressure, EventListener* events,
             AgentLog& log);
  // What the pressure watch found since (a cgroup that appeared, or was
  // removed).
  void LogNewWarnings(AgentLog& log);
  // A reload: warns when `config`'s rules are not the running ones.
  void CheckReload(const config::TraceConfig& config, AgentLog& log) const;
  void Stop();
  void FillStatus(control::StatusReply* reply) const;

 private:
  bool started_ = false;
  std::vector<PressureRule> pressure_rules_;
  std::vector<EventRule> event_rules_;
  // The stalls linux.bpf measures, from the config of the start.
  bpf::LoadedGroups::Request::Stalls stalls_;
  std::vector<int64_t> blocked_thresholds_;
  std::unique_ptr<PressureWatch> pressure_;
  std::unique_ptr<EventWatch> events_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_KERNEL_TRIGGERS_H_
