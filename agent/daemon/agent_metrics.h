#ifndef RINGSIDE_AGENT_DAEMON_AGENT_METRICS_H_
#define RINGSIDE_AGENT_DAEMON_AGENT_METRICS_H_

#include <functional>
#include <memory>
#include <optional>

#include "agent/lifecycle/agent_log.h"
#include "agent/metrics/metrics_listener.h"
#include "agent/metrics/metrics_textfile.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's Prometheus metrics: the textfile node_exporter collects
// (metrics_textfile) and the HTTP listener (metrics_listen), both
// rendering the status `status` builds, each on a thread of its own.
// Metrics never stop a flight recorder: a part that cannot start is
// logged (and the listener's error shown in status), and the agent
// records on.
//
// Not thread-safe: the main thread starts and stops it. What status says
// of the listener is handed to the caller, which guards it (AgentService
// keeps it under its mu_, since status is built on other threads).
class AgentMetrics {
 public:
  // `log` outlives this; `status` may be called on the metrics' threads
  // until Stop().
  AgentMetrics(AgentLog* log, std::function<control::StatusReply()> status);
  ~AgentMetrics() { Stop(); }

  // metrics_listen: serves the metrics over HTTP. Returns what status
  // shows of it (the address bound, or the error), and the listener's
  // counters (null when it did not start), which outlive it; nullopt when
  // the config has no metrics_listen.
  struct Listener {
    control::MetricsListenerStatus state;
    std::shared_ptr<const MetricsListener::Counters> counters;
  };
  std::optional<Listener> StartListener(const config::TraceConfig& config);
  // metrics_textfile: writes the file every metrics_period_ms; the first
  // write is done before this returns.
  void StartTextfile(const config::TraceConfig& config);

  // Stops the listener, then the textfile (waiting for a write under
  // way): both read the status, so they stop before what it reads goes.
  void Stop();

  // `reply`'s metrics_listener: `listener` with its counters now.
  static void FillStatus(const Listener& listener, control::StatusReply* reply);

 private:
  AgentLog& log_;
  const std::function<control::StatusReply()> status_;
  std::unique_ptr<MetricsListener> listener_;
  std::unique_ptr<MetricsTextfile> textfile_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_AGENT_METRICS_H_
