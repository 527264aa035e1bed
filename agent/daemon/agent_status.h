#ifndef RINGSIDE_AGENT_DAEMON_AGENT_STATUS_H_
#define RINGSIDE_AGENT_DAEMON_AGENT_STATUS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/daemon/agent_memory.h"
#include "agent/session/tracing_session.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/snapshots/trigger_tally.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The memory part of `status`: `memory` as read, and the staging and
// buffers of `report`, summed over sources and CPUs.
void SetMemory(const TracingSession::Report& report, const AgentMemory& memory,
               control::MemoryStatus* out);

// What the agent reports about itself, from the session's Report: each
// source's events/s over the last health period, the one-line health
// summary (the log and systemd's STATUS=), and the control socket's
// StatusReply. It measures nothing of the session itself; the caller
// passes the report and the time.
//
// Thread-safe: the main thread ticks, the control thread asks for status.
class AgentStatus {
 public:
  // `started`: when the agent started, for uptime and the first rates.
  explicit AgentStatus(absl::Time started);

  // Takes each source's events/s since the previous tick (or the start).
  void Tick(const TracingSession::Report& report, absl::Time now);

  // "linux.bpf 1234 events/s; buffer 64.0 MiB 12% full; 3 snapshots; 0
  // events lost": a failed source says so instead of its rate.
  std::string HealthLine(const TracingSession::Report& report, uint64_t snapshots_written) const;

  // The agent's last log line: "stopped after 1h2m3s: N events recorded, N
  // lost before the buffers; N snapshots written[, N failed]". Whole
  // seconds, or milliseconds under one ("48ms", not "0").
  std::string StoppedLine(const TracingSession::Progress& progress,
                          const SnapshotWriter::Stats& snapshots, absl::Time now) const;

  // The control socket's status. `suppressed`: triggers that made no
  // snapshot of their own; `triggers`: what became of each trigger's
  // requests (the tally). Rates before the first tick are the average
  // since the start. The agent's own CPU and RSS are read here.
  struct Triggers {
    std::vector<TriggerTally::Counts> counts;
    // The config's trigger names, and what fires each besides a request by
    // name (ConfigReloader::trigger_names()).
    std::map<std::string, std::string> configured;
  };
  control::StatusReply Reply(const TracingSession::Report& report, absl::Time now,
                             const std::string& config_path, const SnapshotWriter::Stats& snapshots,
                             uint64_t suppressed, const Triggers& triggers = {}) const;

 private:
  // Reply()'s sources: their state, events/s and losses.
  void AddSources(const TracingSession::Report& report, absl::Time now,
                  control::StatusReply* st) const;

  const absl::Time started_;
  mutable absl::Mutex mu_;
  std::map<std::string, double> rates_ ABSL_GUARDED_BY(mu_);  // By source name.
  std::map<std::string, uint64_t> last_events_ ABSL_GUARDED_BY(mu_);
  absl::Time last_tick_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_AGENT_STATUS_H_
