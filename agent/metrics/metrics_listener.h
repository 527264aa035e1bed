#ifndef RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_
#define RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/metrics/prometheus_text.h"
#include "base/listen_address.h"
#include "base/scoped_fd.h"
#include "ringside/control/control.pb.h"

struct MHD_Connection;
struct MHD_Daemon;

namespace ringside::agent {

// The agent's Prometheus metrics over HTTP (metrics_listen), for a
// Prometheus server that scrapes the node, as in Kubernetes. libmicrohttpd
// (Debian's) serves it, driven by a thread of its own: only `GET /metrics`
// (and HEAD), answered with PrometheusText() of the status (rendered at most
// once per min_render_interval); any other path 404, any other method 405, a
// request with a body 413; one request per connection.
//
// What a client can hold, and for how long, is bounded whatever it does:
// kConnectionMemory per connection; kConnectionDeadline from the accept to
// the end of the response, however slowly it sends or reads (an absolute
// deadline, not an idle timeout: a byte a second restarts nothing); at most
// kMaxConnectionsPerAddress from one address, kMaxConnections in all. When
// every slot is taken, a new connection displaces the one open longest if
// that one has been open kDisplaceAfter (a scrape is over in milliseconds:
// what has been open a second is slow or hostile); else the new one is
// closed. So slow clients in every slot delay a scrape by nothing, and a
// client can make the agent render its status, and nothing else.
//
// Threading: every libmicrohttpd callback runs on the listener's thread;
// stats() and the accessors from any thread.
class MetricsListener {
 public:
  static constexpr unsigned kMaxConnections = 16;
  static constexpr unsigned kMaxConnectionsPerAddress = 8;
  static constexpr absl::Duration kConnectionDeadline = absl::Seconds(10);
  static constexpr absl::Duration kDisplaceAfter = absl::Seconds(1);
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
  // The address bound, with that port: "127.0.0.1:9464", "[::]:9464".
  const std::string& address() const { return address_; }

  // What it did. Shared, so that a status built on any thread can read
  // them without holding the listener, whose end joins that thread.
  struct Counters {
    std::atomic<uint64_t> requests{0};  // Answered, of every kind.
    // Connections the listener ended: at their deadline; displaced by a
    // newer one; new ones closed with every slot taken by young ones.
    std::atomic<uint64_t> ended_at_deadline{0};
    std::atomic<uint64_t> displaced{0};
    std::atomic<uint64_t> refused{0};
  };
  std::shared_ptr<const Counters> counters() const { return counters_; }
  uint64_t requests() const { return counters_->requests.load(std::memory_order_relaxed); }

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
  // An open connection, by accept order (the oldest first).
  struct Open {
    int fd;
    std::chrono::steady_clock::time_point accepted;
    bool ended;  // shutdown() by the listener; libmicrohttpd closes it next.
  };
  using OpenMap = std::map<uint64_t, Open>;

  explicit MetricsListener(Options options) : options_(std::move(options)) {}
  // The listener's thread: libmicrohttpd's events and the deadlines, until
  // wake_fd_ is written.
  void Serve();
  // Ends the connections past their deadline; the time until the next
  // deadline (-1: none), in milliseconds.
  int EndOverdue(std::chrono::steady_clock::time_point now);
  // libmicrohttpd's callbacks (metrics_listener.cc).
  friend struct MetricsListenerCallbacks;
  // A connection accepted: its deadline set, and one displaced (or it
  // refused) when every slot is taken.
  void Accepted(MHD_Connection* connection, void** socket_context);
  void Closed(void* socket_context);
  // Ends one connection: its socket shut down both ways, which
  // libmicrohttpd sees and closes (the descriptor stays its own).
  void End(Open* open);

  Options options_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  std::string address_;
  base::ScopedFd wake_fd_;  // An eventfd: written to stop the thread.
  std::thread thread_;
  // The listener's thread's only.
  OpenMap open_;
  uint64_t next_seq_ = 0;

  const std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
  mutable absl::Mutex cache_mu_;
  mutable std::string cached_ ABSL_GUARDED_BY(cache_mu_);
  mutable absl::Time cached_at_ ABSL_GUARDED_BY(cache_mu_) = absl::InfinitePast();
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_METRICS_METRICS_LISTENER_H_
