#ifndef RINGSIDE_AGENT_METRICS_PROMETHEUS_TEXT_H_
#define RINGSIDE_AGENT_METRICS_PROMETHEUS_TEXT_H_

#include <string>

#include "ringside/control/control.pb.h"

namespace ringside::agent {

// What the metrics say besides the agent's status.
struct MetricsOptions {
  // The running kernel's release (uname -r), a label of ringside_build_info.
  std::string kernel;
  // The staging losses by CPU as well (metrics_per_cpu): a cpu label on
  // ringside_staging_events_lost_total, a series per CPU and kind.
  bool per_cpu = false;
};

// The agent's status in Prometheus' text exposition format (version 0.0.4),
// one renderer for every way it is read: `ringside status --prometheus`
// and the textfile the agent writes for node_exporter. Names, types and
// units follow Prometheus' conventions (docs/metrics.md lists them); labels
// are bounded sets only: sources, buffers by index, loss kinds (the record
// types), file kinds, results. Never a path, a pid, a reason or a
// container. Ends with a newline.
std::string PrometheusText(const control::StatusReply& status, const MetricsOptions& options);

// The running kernel's release, for MetricsOptions::kernel ("" when
// uname fails).
std::string RunningKernelRelease();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_METRICS_PROMETHEUS_TEXT_H_
