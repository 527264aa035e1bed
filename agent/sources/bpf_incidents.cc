#include "agent/sources/bpf_incidents.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/config/defaults.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {

// How long a told block is remembered once no sweep sees it: longer than
// the reader takes to read a record off the rings.
constexpr int64_t kForgetAfterNs = 30'000'000'000;

Incident StallIncident(const rs_task_stall& e, Incident::Kind kind) {
  Incident incident;
  incident.kind = kind;
  incident.boottime_ns = static_cast<int64_t>(e.h.ts_ns);
  incident.pid = e.pid;
  incident.tgid = e.tgid;
  incident.comm = std::string(bpf::CommOf(e.comm));
  incident.cgroup_id = e.cgroup_id;
  incident.since_ns = static_cast<int64_t>(e.since_ns);
  incident.stalled_ns = static_cast<int64_t>(bpf::StalledNs(e));
  incident.cpu = kind == Incident::Kind::kRunqueueDelay ? static_cast<int32_t>(e.h.cpu) : e.cpu;
  incident.other_pid = e.other_pid;
  incident.other_comm = std::string(bpf::CommOf(e.other_comm));
  return incident;
}

Incident TaskIncident(Incident::Kind kind, const rs_event_header& h, int32_t pid, int32_t tgid,
                      int32_t signal, const char (&comm)[RS_TASK_COMM_LEN], uint64_t cgroup_id) {
  Incident incident;
  incident.kind = kind;
  incident.boottime_ns = static_cast<int64_t>(h.ts_ns);
  incident.pid = pid;
  incident.tgid = tgid;
  incident.signal = signal;
  incident.comm = std::string(bpf::CommOf(comm));
  incident.cgroup_id = cgroup_id;
  return incident;
}

}  // namespace

bpf::LoadedGroups::Request::Stalls StallsOf(const config::TraceConfig& config) {
  bpf::LoadedGroups::Request::Stalls stalls;
  auto least = [](uint64_t* ns, uint32_t ms) {
    const uint64_t n = uint64_t{ms} * 1'000'000;
    if (*ns == 0 || n < *ns) *ns = n;
  };
  for (const auto& t : config.trigger_config().triggers()) {
    if (t.has_blocked()) least(&stalls.blocked_ns, t.blocked().threshold_ms());
    if (t.has_runqueue_delay()) least(&stalls.runqueue_ns, t.runqueue_delay().threshold_ms());
  }
  if (stalls.blocked_ns != 0 || stalls.runqueue_ns != 0) stalls.max_tasks = kStallTasks;
  return stalls;
}

std::optional<Incident> IncidentOfRecord(const bpf::Record& r) {
  switch (r.type) {
    case RS_EV_OOM_KILL: {
      const rs_oom_kill& e = r.oom_kill();
      return TaskIncident(Incident::Kind::kOomKill, e.h, e.pid, e.tgid, 0, e.comm, e.cgroup_id);
    }
    case RS_EV_FATAL_SIGNAL: {
      const rs_fatal_signal& e = r.fatal_signal();
      return TaskIncident(Incident::Kind::kFatalSignal, e.h, e.target_pid, e.target_tgid, e.sig,
                          e.target_comm, e.target_cgroup_id);
    }
    case RS_EV_CORE_DUMP: {
      const rs_core_dump& e = r.core_dump();
      return TaskIncident(Incident::Kind::kCoreDump, e.h, e.pid, e.tgid, e.sig, e.comm,
                          e.cgroup_id);
    }
    case RS_EV_TASK_BLOCKED:
      return StallIncident(r.task_stall(), Incident::Kind::kBlocked);
    case RS_EV_RUNQUEUE_DELAY:
      return StallIncident(r.task_stall(), Incident::Kind::kRunqueueDelay);
    default:
      return std::nullopt;
  }
}

bool TaskInD(int32_t tid, const std::string& proc) {
  const std::string stat = base::ReadSmallFileOrEmpty(absl::StrCat(proc, "/", tid, "/stat"));
  // "PID (COMM) STATE ...": the comm may hold anything, ')' too.
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'D';
}

std::vector<int64_t> BlockedThresholdsOf(const config::TraceConfig& config) {
  std::vector<int64_t> out;
  for (const auto& t : config.trigger_config().triggers()) {
    if (t.has_blocked()) out.push_back(int64_t{t.blocked().threshold_ms()} * 1'000'000);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StallSweep::StallSweep(std::vector<int64_t> thresholds_ns)
    : thresholds_(std::move(thresholds_ns)),
      period_ns_(std::clamp<int64_t>(thresholds_.empty() ? 0 : thresholds_.front() / 4, 100'000'000,
                                     1'000'000'000)) {
  std::sort(thresholds_.begin(), thresholds_.end());
}

size_t StallSweep::Crossed(int64_t stalled_ns) const {
  return static_cast<size_t>(std::upper_bound(thresholds_.begin(), thresholds_.end(), stalled_ns) -
                             thresholds_.begin());
}

std::vector<Incident> StallSweep::Sweep(const std::vector<bpf::StallTasks::Blocked>& blocked,
                                        int64_t now_ns) {
  next_ns_ = now_ns + period_ns_;
  std::vector<Incident> incidents;
  for (const bpf::StallTasks::Blocked& b : blocked) {
    const int64_t since = static_cast<int64_t>(b.task.since_ns);
    const int64_t stalled = now_ns - since;
    const size_t crossed = Crossed(stalled);
    if (crossed == 0) continue;
    auto [it, fresh] = told_.try_emplace(b.tid, Told{since, 0, now_ns});
    if (!fresh && it->second.since_ns != since) it->second = Told{since, 0, now_ns};
    it->second.seen_ns = now_ns;
    if (crossed <= it->second.crossed) continue;
    it->second.crossed = crossed;
    Incident incident;
    incident.kind = Incident::Kind::kBlocked;
    incident.boottime_ns = now_ns;
    incident.pid = b.tid;
    incident.tgid = b.task.tgid;
    incident.comm = std::string(bpf::CommOf(b.task.comm));
    incident.cgroup_id = b.task.cgroup_id;
    incident.since_ns = since;
    incident.stalled_ns = stalled;
    incident.still_blocked = true;
    incident.cpu = b.task.cpu;
    incidents.push_back(std::move(incident));
  }
  absl::erase_if(told_, [&](const auto& t) { return now_ns - t.second.seen_ns > kForgetAfterNs; });
  return incidents;
}

bool StallSweep::TellWoken(int32_t tid, int64_t since_ns, int64_t stalled_ns) {
  auto it = told_.find(tid);
  if (it == told_.end()) return true;
  const bool tell = it->second.since_ns != since_ns || Crossed(stalled_ns) > it->second.crossed;
  told_.erase(it);
  return tell;
}

}  // namespace ringside::agent
