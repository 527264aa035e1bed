#include "agent/sources/incident.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ringside::agent {
namespace {

std::string Task(int32_t pid, const std::string& comm) {
  return comm.empty() ? absl::StrCat("pid ", pid) : absl::StrCat("pid ", pid, " (", comm, ")");
}

}  // namespace

const char* IncidentKindName(Incident::Kind kind) {
  switch (kind) {
    case Incident::Kind::kOomKill:
      return "oom_kill";
    case Incident::Kind::kFatalSignal:
      return "fatal_signal";
    case Incident::Kind::kCoreDump:
      return "core_dump";
    case Incident::Kind::kBlocked:
      return "blocked";
    case Incident::Kind::kRunqueueDelay:
      return "runqueue_delay";
  }
  return "unknown";
}

std::string IncidentDetail(const Incident& incident) {
  const std::string task = Task(incident.pid, incident.comm);
  const std::string stalled = absl::FormatDuration(
      absl::Trunc(absl::Nanoseconds(incident.stalled_ns), absl::Microseconds(100)));
  switch (incident.kind) {
    case Incident::Kind::kOomKill:
      return absl::StrCat("OOM kill of ", task);
    case Incident::Kind::kFatalSignal:
      return absl::StrCat("signal ", incident.signal, " kills ", task);
    case Incident::Kind::kCoreDump:
      return absl::StrCat(task, " dumped core (signal ", incident.signal, ")");
    case Incident::Kind::kBlocked:
      if (incident.still_blocked) {
        return absl::StrCat(task, " blocked in D for ", stalled, " and not woken yet (cpu ",
                            incident.cpu, ")");
      }
      return absl::StrCat(task, " blocked in D for ", stalled,
                          incident.other_pid == 0
                              ? std::string()
                              : absl::StrCat(", woken in the context of ",
                                             Task(incident.other_pid, incident.other_comm)));
    case Incident::Kind::kRunqueueDelay:
      return absl::StrCat(
          task, " waited ", stalled, " for cpu ", incident.cpu,
          incident.other_pid == 0
              ? std::string()
              : absl::StrCat(", behind ", Task(incident.other_pid, incident.other_comm)));
  }
  return task;
}

}  // namespace ringside::agent
