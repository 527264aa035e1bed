#ifndef RINGSIDE_AGENT_SOURCES_INCIDENT_H_
#define RINGSIDE_AGENT_SOURCES_INCIDENT_H_

#include <cstdint>
#include <string>

namespace ringside::agent {

// Something the kernel reported going wrong, as a data source read it: what
// snapshot triggers fire on (trigger_config's incident filters).
struct Incident {
  enum class Kind { kOomKill, kFatalSignal, kCoreDump, kBlocked, kRunqueueDelay };
  Kind kind = Kind::kOomKill;
  int64_t boottime_ns = 0;  // When the kernel saw it (the record's time).
  // The task it happened to (the victim of a kill or signal; the process
  // that dumped core). 0 when the kernel did not say (old oom/mark_victim).
  int32_t pid = 0;
  int32_t tgid = 0;
  int32_t signal = 0;  // kFatalSignal, kCoreDump: the signal; else 0.
  std::string comm;    // The task's name; may be empty.
  // The task's cgroup v2 id (the inode number of its directory); 0 when the
  // kernel did not say.
  uint64_t cgroup_id = 0;

  // kBlocked (a task off the CPU in D) and kRunqueueDelay (a runnable task
  // kept from a CPU): when the stall began (CLOCK_BOOTTIME) and how long it
  // lasted, to boottime_ns.
  int64_t since_ns = 0;
  int64_t stalled_ns = 0;
  // kBlocked: not woken yet (found by the sweep of stall_tasks).
  bool still_blocked = false;
  // kBlocked: the CPU it blocked on. kRunqueueDelay: the CPU it waited on
  // (queued there: woken, preempted, or migrated).
  int32_t cpu = -1;
  // kBlocked: the waker (0: unknown). kRunqueueDelay: the task that ran
  // before it on its CPU.
  int32_t other_pid = 0;
  std::string other_comm;
};

// Told of incidents as a source reads them, on that source's reader
// thread, after the incident's own event was written: an implementation
// returns quickly and never waits for the session (a snapshot it wants is
// taken on another thread).
class IncidentListener {
 public:
  virtual ~IncidentListener() = default;
  virtual void OnIncident(const Incident& incident) = 0;
};

// "oom_kill", "fatal_signal", "core_dump", "blocked", "runqueue_delay": as
// the config and logs name them.
const char* IncidentKindName(Incident::Kind kind);

// What happened, in words, for logs and a snapshot's trigger: "pid 41
// (fsync-er) blocked in D for 2.01s, woken in the context of pid 40
// (kworker/1:2)".
std::string IncidentDetail(const Incident& incident);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_INCIDENT_H_
