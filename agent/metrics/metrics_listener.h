#ifndef RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_
#define RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/config/listen_address.h"
#include "agent/metrics/prometheus_text.h"
#include "ringside/control/control.pb.h"

struct MHD_Daemon;

namespace ringside::agent {

// The agent's Prometheus metrics over HTTP (metrics_listen), for a
// Prometheus server that scrapes the node, as in Kubernetes. libmicrohttpd
// (Debian's) serves it, on a thread of its own: only `GET /metrics` (and
// HEAD), answered with PrometheusText() of the status (rendered at most
// once per min_render_interval); any other path 404, any other method 405, a request with a
// body 413. A connection may take at most kRequestTimeout and
// kConnectionMemory; at most kMaxConnections are open at once (more are
// closed as they come), kMaxConnectionsPerAddress from one address. A
// client can make the agent render its status, and nothing else.
class MetricsListener {
 public:
  static constexpr unsigned kMaxConnections = 16;
  static constexpr unsigned kMaxConnectionsPerAddress = 8;
  static constexpr unsigned kRequestTimeoutSeconds = 10;
  static constexpr size_t kConnectionMemory = 16 << 10;

  struct Options {
    std::string listen;
    MetricsOptions metrics;
    // The agent's status, from the listener's thread.
    std::function<control::StatusReply()> status;
    // Scrapes closer together than this get the text rendered last: a
    // client that asks in a loop costs the agent one status a second.
    absl::Duration min_render_interval = absl::Seconds(1);
  };
  // Fails naming the address and why (taken, not allowed: a unit's
  // RestrictAddressFamilies=AF_UNIX).
  static absl::StatusOr<std::unique_ptr<MetricsListener>> Start(Options options);
  ~MetricsListener();  // Closes the socket and every connection.
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  // The port it listens on (the one given, or the kernel's pick for 0).
  uint16_t port() const { return port_; }
  // Requests answered, of every kind.
  uint64_t requests() const;

  // One request as the HTTP layer hands it: the status code and body it
  // gets. Here for the tests and the fuzzer, which reach it without a
  // socket.
  struct Answer {
    unsigned status;
    std::string body;
    const char* content_type;
  };
  Answer Respond(const std::string& method, const std::string& url, bool has_body) const;

 private:
  explicit MetricsListener(Options options) : options_(std::move(options)) {}

  Options options_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  mutable std::atomic<uint64_t> requests_{0};
  mutable absl::Mutex cache_mu_;
  mutable std::string cached_ ABSL_GUARDED_BY(cache_mu_);
  mutable absl::Time cached_at_ ABSL_GUARDED_BY(cache_mu_) = absl::InfinitePast();
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_
