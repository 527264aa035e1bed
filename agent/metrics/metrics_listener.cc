#include "agent/metrics/metrics_listener.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kTextType[] = "text/plain; charset=utf-8";

// The connection's request: answered at once, from its headers (a
// request for metrics has no body worth waiting for).
MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/,
                  size_t* /*upload_data_size*/, void** /*request_state*/) {
  const auto* self = static_cast<const MetricsListener*>(cls);
  const char* length =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const bool has_body = (length != nullptr && absl::string_view(length) != "0") ||
                        MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_TRANSFER_ENCODING) != nullptr;
  const MetricsListener::Answer answer = self->Respond(method, url, has_body);
  MHD_Response* response = MHD_create_response_from_buffer(
      answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // Out of memory: the connection is closed.
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type);
  // One request per connection: its deadline runs from the accept to this
  // response's end, and no idle keep-alive holds a slot between scrapes.
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  if (answer.status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  const MHD_Result queued = MHD_queue_response(connection, answer.status, response);
  MHD_destroy_response(response);
  return queued;
}

// "127.0.0.1:9464", "[::]:9464".
std::string AddressText(const sockaddr_storage& a, uint16_t port) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", port);
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof(text));
  return absl::StrCat(text, ":", port);
}

int MillisecondsUntil(std::chrono::steady_clock::time_point now,
                      std::chrono::steady_clock::time_point then) {
  if (then <= now) return 0;
  // Rounded up: woken before the deadline, a connection would wait a turn.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(then - now).count();
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

// A socket listening at `a` (every IPv4 address instead of every address
// where the machine has no IPv6: `a` then says so). `where` names it in
// errors.
absl::StatusOr<base::ScopedFd> ListeningSocket(base::ListenAddress* a, const std::string& where) {
  // The socket is made here, not by libmicrohttpd, so that an address
  // taken or a family a service manager forbids is named as such.
  base::ScopedFd fd(socket(a->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid() && a->any && (errno == EAFNOSUPPORT || errno == EINVAL)) {
    // No IPv6 on this machine: every IPv4 address, then.
    auto* in = reinterpret_cast<sockaddr_in*>(&a->addr);
    *in = sockaddr_in{};
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(a->port);
    a->len = sizeof(sockaddr_in);
    fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  }
  if (!fd.valid()) {
    return base::ErrnoStatus(
        absl::StrCat(where,
                     ": socket (a systemd unit allows only AF_UNIX unless "
                     "RestrictAddressFamilies= adds AF_INET AF_INET6; docs/metrics.md)"));
  }
  const int one = 1, zero = 0;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (a->any && a->addr.ss_family == AF_INET6) {
    setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&a->addr), a->len) != 0 ||
      listen(fd.get(), 64) != 0) {
    const int err = errno;
    const bool privileged_port = err == EACCES && a->port < 1024;
    errno = err;
    const absl::Status st = base::ErrnoStatus(
        privileged_port ? absl::StrCat(where,
                                       " (a port below 1024 takes CAP_NET_BIND_SERVICE, which the "
                                       "agent does not keep: choose 1024 or above)")
                        : where);
    return st;
  }
  return fd;
}

}  // namespace

struct MetricsListenerCallbacks {
  static void OnConnection(void* cls, MHD_Connection* connection, void** socket_context,
                           MHD_ConnectionNotificationCode toe) {
    auto* self = static_cast<MetricsListener*>(cls);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
      self->Accepted(connection, socket_context);
    } else {
      self->Closed(*socket_context);
    }
  }
};

absl::StatusOr<std::unique_ptr<MetricsListener>> MetricsListener::Start(Options options) {
  absl::StatusOr<base::ListenAddress> a = base::ParseListenAddress(options.listen);
  if (!a.ok())
    return absl::InvalidArgumentError(absl::StrCat("metrics_listen ", a.status().message()));
  const std::string where = absl::StrCat("metrics_listen ", options.listen);
  absl::StatusOr<base::ScopedFd> listening = ListeningSocket(&*a, where);
  if (!listening.ok()) return listening.status();
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(listening->get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);

  std::unique_ptr<MetricsListener> m(new MetricsListener(std::move(options)));
  m->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  m->address_ = AddressText(bound, m->port_);
  m->wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m->wake_fd_.valid()) return base::ErrnoStatus(absl::StrCat(where, ": eventfd"));
  // No polling thread of libmicrohttpd's: ours runs it (Serve()), so that
  // the deadlines are kept on the thread that owns the connections.
  unsigned flags = MHD_USE_EPOLL;
  if (bound.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  // libmicrohttpd's from here on, whether it starts or not (below).
  const int fd = listening->release();
  // libmicrohttpd's own limit is above ours: room for the connections just
  // ended (displaced, refused) until it has closed them.
  m->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Handle, m.get(), MHD_OPTION_LISTEN_SOCKET,
      static_cast<MHD_socket>(fd), MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(2 * kMaxConnections), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned int>(kMaxConnectionsPerAddress), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(absl::ToInt64Seconds(kConnectionDeadline)),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<size_t>(kConnectionMemory),
      MHD_OPTION_NOTIFY_CONNECTION, &MetricsListenerCallbacks::OnConnection, m.get(),
      MHD_OPTION_END);
  if (m->daemon_ == nullptr) {
    // Not closed here: libmicrohttpd closes the socket on some of its
    // failures, and a second close could end a descriptor another thread
    // has opened since. A failed start leaks one descriptor, once.
    return absl::InternalError(absl::StrCat(where, ": libmicrohttpd did not start"));
  }
  m->thread_ = std::thread([p = m.get()] { p->Serve(); });
  return m;
}

MetricsListener::~MetricsListener() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
    thread_.join();
  }
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // Closes the socket too.
}

void MetricsListener::Serve() {
  pthread_setname_np(pthread_self(), "rs-metrics-http");
  pthread_setname_np(pthread_self(), "rs-metrics-http");  // In top -H, perf, /proc.
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
  pollfd fds[2] = {{info != nullptr ? info->epoll_fd : -1, POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
  for (;;) {
    int timeout_ms = EndOverdue(std::chrono::steady_clock::now());
    MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
    if (MHD_get_timeout(daemon_, &mhd_ms) == MHD_YES) {
      const int ms = static_cast<int>(
          std::min<MHD_UNSIGNED_LONG_LONG>(mhd_ms, std::numeric_limits<int>::max()));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    EndOverdue(std::chrono::steady_clock::now());
    MHD_run(daemon_);
  }
}

int MetricsListener::EndOverdue(std::chrono::steady_clock::time_point now) {
  const auto deadline = std::chrono::microseconds(absl::ToInt64Microseconds(kConnectionDeadline));
  for (auto& [seq, open] : open_) {
    if (open.ended) continue;
    // In accept order: the first not overdue is the next deadline.
    if (open.accepted + deadline > now) return MillisecondsUntil(now, open.accepted + deadline);
    End(&open);
    counters_->ended_at_deadline.fetch_add(1, std::memory_order_relaxed);
  }
  return -1;
}

void MetricsListener::Accepted(MHD_Connection* connection, void** socket_context) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  const uint64_t seq = next_seq_++;
  const auto now = std::chrono::steady_clock::now();
  *socket_context = reinterpret_cast<void*>(static_cast<uintptr_t>(seq));
  Open& added = open_[seq] = Open{info != nullptr ? info->connect_fd : -1, now, false};
  unsigned live = 0;
  Open* oldest = nullptr;
  for (auto& [s, open] : open_) {
    if (open.ended) continue;
    live++;
    if (oldest == nullptr) oldest = &open;
  }
  if (live <= kMaxConnections) return;
  const auto displace_after = std::chrono::microseconds(absl::ToInt64Microseconds(kDisplaceAfter));
  if (oldest != &added && now - oldest->accepted >= displace_after) {
    End(oldest);
    counters_->displaced.fetch_add(1, std::memory_order_relaxed);
  } else {
    End(&added);
    counters_->refused.fetch_add(1, std::memory_order_relaxed);
  }
}

void MetricsListener::Closed(void* socket_context) {
  open_.erase(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(socket_context)));
}

void MetricsListener::End(Open* open) {
  // shutdown(), not close(): the descriptor is libmicrohttpd's, which sees
  // the socket end and closes it (and calls Closed()) in its next run.
  if (open->fd >= 0) shutdown(open->fd, SHUT_RDWR);
  open->ended = true;
}

MetricsListener::Answer MetricsListener::Respond(const std::string& method, const std::string& url,
                                                 bool has_body) const {
  counters_->requests.fetch_add(1, std::memory_order_relaxed);
  if (method != "GET" && method != "HEAD") {
    return {MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n", kTextType};
  }
  if (has_body)
    return {MHD_HTTP_CONTENT_TOO_LARGE, "a request for metrics has no body\n", kTextType};
  if (url != "/metrics") return {MHD_HTTP_NOT_FOUND, "only /metrics is served here\n", kTextType};
  absl::MutexLock lock(&cache_mu_);
  const absl::Time now = absl::Now();
  if (cached_at_ == absl::InfinitePast() || now - cached_at_ >= options_.min_render_interval) {
    cached_ = PrometheusText(options_.status(), options_.metrics);
    cached_at_ = now;
  }
  return {MHD_HTTP_OK, cached_, kMetricsType};
}

}  // namespace ringside::agent
