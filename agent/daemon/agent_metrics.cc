#include "agent/daemon/agent_metrics.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config/defaults.h"
#include "agent/metrics/prometheus_text.h"

namespace ringside::agent {

AgentMetrics::AgentMetrics(AgentLog* log, std::function<control::StatusReply()> status)
    : log_(*log), status_(std::move(status)) {}

std::optional<AgentMetrics::Listener> AgentMetrics::StartListener(
    const config::TraceConfig& config) {
  if (!config.has_metrics_listen()) return std::nullopt;
  const MetricsOptions metrics{.kernel = RunningKernelRelease(),
                               .per_cpu = config.metrics_per_cpu()};
  Listener listener;
  listener.state.set_listen(config.metrics_listen());
  absl::StatusOr<std::unique_ptr<MetricsListener>> http = MetricsListener::Start(
      {.listen = config.metrics_listen(), .metrics = metrics, .status = status_});
  if (!http.ok()) {
    listener.state.set_error(std::string(http.status().message()));
    // Metrics never stop a flight recorder: it records on, and says why.
    log_.Warning(absl::StrCat(http.status().message(), "; the metrics are not served"));
    return listener;
  }
  listener.state.set_listening((*http)->address());
  // The address bound, with the kernel's port for :0.
  log_.Info(absl::StrCat("metrics: http://", (*http)->address(), "/metrics"));
  listener.counters = (*http)->counters();
  listener_ = std::move(*http);
  return listener;
}

void AgentMetrics::StartTextfile(const config::TraceConfig& config) {
  if (!config.has_metrics_textfile()) return;
  const absl::Duration period = absl::Milliseconds(
      config.has_metrics_period_ms() ? config.metrics_period_ms() : kDefaultMetricsPeriodMs);
  MetricsTextfile::Options o;
  o.dir = config.metrics_textfile();
  o.period = period;
  o.metrics = {.kernel = RunningKernelRelease(), .per_cpu = config.metrics_per_cpu()};
  o.status = status_;
  o.warn = [this](const std::string& line) {
    log_.LogLimited(LogLevel::kWarning, "metrics", line);
  };
  o.notice = [this](const std::string& line) { log_.Notice(line); };
  absl::StatusOr<std::unique_ptr<MetricsTextfile>> m = MetricsTextfile::Start(std::move(o));
  if (!m.ok()) {
    // Metrics never stop a flight recorder: it records on, and says why.
    log_.Warning(absl::StrCat(m.status().message(), "; no metrics are written"));
    return;
  }
  textfile_ = std::move(*m);
  log_.Info(absl::StrCat("metrics: ", config.metrics_textfile(), "/", MetricsTextfile::kFileName,
                         " every ", absl::FormatDuration(period)));
}

void AgentMetrics::Stop() {
  listener_.reset();
  textfile_.reset();
}

void AgentMetrics::FillStatus(const Listener& listener, control::StatusReply* reply) {
  control::MetricsListenerStatus* out = reply->mutable_metrics_listener();
  *out = listener.state;
  if (listener.counters == nullptr) return;
  const MetricsListener::Counters& c = *listener.counters;
  out->set_requests(c.requests.load(std::memory_order_relaxed));
  out->set_ended_at_deadline(c.ended_at_deadline.load(std::memory_order_relaxed));
  out->set_displaced(c.displaced.load(std::memory_order_relaxed));
  out->set_refused(c.refused.load(std::memory_order_relaxed));
}

}  // namespace ringside::agent
