// AgentService's Prometheus metrics: the textfile for node_exporter
// (metrics_textfile) and the HTTP listener (metrics_listen).

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config/defaults.h"
#include "agent/daemon/agent_service.h"
#include "agent/metrics/metrics_listener.h"
#include "agent/metrics/metrics_textfile.h"
#include "agent/metrics/prometheus_text.h"

namespace ringside::agent {

void AgentService::StartMetrics(const config::TraceConfig& config) {
  const MetricsOptions metrics{.kernel = RunningKernelRelease(),
                               .per_cpu = config.metrics_per_cpu()};
  if (config.has_metrics_listen()) {
    control::MetricsListenerStatus state;
    state.set_listen(config.metrics_listen());
    absl::StatusOr<std::unique_ptr<MetricsListener>> http = MetricsListener::Start(
        {.listen = config.metrics_listen(), .metrics = metrics, .status = [this] {
           return BuildStatus();
         }});
    if (http.ok()) {
      state.set_listening((*http)->address());
      // The address bound, with the kernel's port for :0.
      log_.Info(absl::StrCat("metrics: http://", (*http)->address(), "/metrics"));
    } else {
      state.set_error(std::string(http.status().message()));
      // Metrics never stop a flight recorder: it records on, and says why.
      log_.Warning(absl::StrCat(http.status().message(), "; the metrics are not served"));
    }
    {
      absl::MutexLock lock(&mu_);
      metrics_listener_ = std::move(state);
      if (http.ok()) metrics_http_counters_ = (*http)->counters();
    }
    if (http.ok()) metrics_http_ = std::move(*http);
  }
  if (!config.has_metrics_textfile()) return;
  const absl::Duration period = absl::Milliseconds(
      config.has_metrics_period_ms() ? config.metrics_period_ms() : kDefaultMetricsPeriodMs);
  MetricsTextfile::Options o;
  o.dir = config.metrics_textfile();
  o.period = period;
  o.metrics = metrics;
  o.status = [this] { return BuildStatus(); };
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
  metrics_ = std::move(*m);
  log_.Info(absl::StrCat("metrics: ", config.metrics_textfile(), "/", MetricsTextfile::kFileName,
                         " every ", absl::FormatDuration(period)));
}

void AgentService::FillMetricsStatus(control::StatusReply* reply) {
  absl::MutexLock lock(&mu_);
  if (!metrics_listener_.has_value()) return;
  control::MetricsListenerStatus* out = reply->mutable_metrics_listener();
  *out = *metrics_listener_;
  if (metrics_http_counters_ != nullptr) {
    const MetricsListener::Counters& c = *metrics_http_counters_;
    out->set_requests(c.requests.load(std::memory_order_relaxed));
    out->set_ended_at_deadline(c.ended_at_deadline.load(std::memory_order_relaxed));
    out->set_displaced(c.displaced.load(std::memory_order_relaxed));
    out->set_refused(c.refused.load(std::memory_order_relaxed));
  }
}

}  // namespace ringside::agent
