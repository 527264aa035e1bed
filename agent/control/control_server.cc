#include "agent/control/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/control/control_frame.h"
#include "agent/control/control_socket.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

std::string Errno(int err) { return std::strerror(err); }

// "group ringside (gid 990)", or "gid 990" when it has no name.
std::string GroupDisplayName(gid_t gid) {
  std::vector<char> buf(16384);
  struct group grp;
  struct group* found = nullptr;
  if (getgrgid_r(gid, &grp, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return absl::StrCat("group ", found->gr_name, " (gid ", gid, ")");
  }
  return absl::StrCat("gid ", gid);
}

struct Connection {
  explicit Connection(uint32_t max_request_bytes) : reader(max_request_bytes) {}
  base::ScopedFd fd;  // None once closed.
  Peer peer;
  FrameReader reader;
  std::string out;  // The reply being sent; empty when none.
  size_t out_sent = 0;
  bool peer_done_sending = false;
  bool close_after_write = false;
  // Waiting for a LaterReply: the request's id (0: not parked), and the
  // reply sent if it has not come by `deadline`.
  uint64_t parked_id = 0;
  control::Reply if_late;
  absl::Time deadline;
};

// A reply to a connection we are about to close, sent without waiting: a
// socket with no reply unsent has room for a short one.
void SendAndClose(base::ScopedFd fd, const control::Reply& reply) {
  const std::string frame = EncodeFrame(reply);
  (void)!send(fd.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void SendErrorAndClose(base::ScopedFd fd, const std::string& error) {
  control::Reply reply;
  reply.set_error(error);
  SendAndClose(std::move(fd), reply);
}

}  // namespace

// Where LaterReplies go: the loop takes them when woken by `event_fd`.
struct LaterReply::Mailbox {
  absl::Mutex mu;
  // The loop's eventfd; -1 once the loop is gone (replies are dropped).
  int event_fd ABSL_GUARDED_BY(mu) = -1;
  std::vector<std::pair<uint64_t, control::Reply>> replies ABSL_GUARDED_BY(mu);
};

void LaterReply::Send(control::Reply reply) const {
  if (mailbox_ == nullptr) return;
  absl::MutexLock lock(&mailbox_->mu);
  if (mailbox_->event_fd < 0) return;
  mailbox_->replies.emplace_back(id_, std::move(reply));
  const uint64_t one = 1;
  (void)!write(mailbox_->event_fd, &one, sizeof(one));
}

class ControlServer::Loop {
 public:
  Loop(base::ScopedFd listen_fd, base::ScopedFd wake_fd, base::ScopedFd mailbox_fd, Options options,
       ControlHandler* handler)
      : listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        mailbox_fd_(std::move(mailbox_fd)),
        group_(options.group),
        who_may_(group_.has_value() ? absl::StrCat("root or in ", GroupDisplayName(*group_))
                                    : std::string("root (no control_group is set)")),
        options_(std::move(options)),
        handler_(handler) {
    absl::MutexLock lock(&mailbox_->mu);
    mailbox_->event_fd = mailbox_fd_.get();
  }

  ~Loop() {
    std::vector<std::pair<uint64_t, control::Reply>> replies;
    {
      absl::MutexLock lock(&mailbox_->mu);
      mailbox_->event_fd = -1;
      replies.swap(mailbox_->replies);
    }
    for (auto& c : connections_) {
      if (!c->fd.valid()) continue;
      if (c->parked_id == 0) {
        // A reply partly sent stays cut: the peer sees the connection close.
        c->fd.reset();
        continue;
      }
      // Its reply came after the loop's last round: it is still the answer.
      auto reply = std::find_if(replies.begin(), replies.end(),
                                [&c](const auto& r) { return r.first == c->parked_id; });
      if (reply != replies.end()) {
        SendAndClose(std::move(c->fd), reply->second);
      } else {
        SendErrorAndClose(std::move(c->fd),
                          "the agent is stopping before it could answer this request");
      }
    }
    listen_fd_.reset();
    wake_fd_.reset();
    mailbox_fd_.reset();
  }

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
  }

  // From another thread: no new connections nor requests from now on; the
  // loop goes on for the parked ones' replies. Returns once the loop has
  // closed to them, so that no handler is running nor will run: a request
  // the loop had read before the flag (a trigger) is handled before this
  // returns, not after the caller has moved on.
  void StopAccepting() {
    stop_accepting_.store(true);
    // Through the mailbox's eventfd: the wake eventfd ends the loop.
    const uint64_t one = 1;
    (void)!write(mailbox_fd_.get(), &one, sizeof(one));
    closed_to_new_requests_.WaitForNotification();
  }

  void Run() {
    pthread_setname_np(pthread_self(), "rs-control");
    // However the loop ends, StopAccepting() no longer waits for it.
    absl::Cleanup closed = [this] {
      if (!closed_to_new_requests_.HasBeenNotified()) closed_to_new_requests_.Notify();
    };
    std::vector<pollfd> fds;
    while (true) {
      fds.clear();
      fds.push_back({wake_fd_.get(), POLLIN, 0});
      const absl::Time now = absl::Now();
      fds.push_back(
          {listen_fd_.get(), static_cast<short>(now >= accept_paused_until_ ? POLLIN : 0), 0});
      fds.push_back({mailbox_fd_.get(), POLLIN, 0});
      absl::Time next_deadline = absl::InfiniteFuture();
      if (now < accept_paused_until_) next_deadline = accept_paused_until_;
      for (const auto& c : connections_) {
        // Parked: no events asked, for POLLHUP and POLLERR only, which
        // poll() always reports.
        short events = 0;
        if (c->parked_id == 0 && !c->out.empty()) {
          events = POLLOUT;
        } else if (c->parked_id == 0 && !c->close_after_write && !c->peer_done_sending) {
          events = POLLIN;
        }
        fds.push_back({c->fd.get(), events, 0});
        next_deadline = std::min(next_deadline, c->deadline);
      }
      int timeout_ms = -1;
      if (next_deadline != absl::InfiniteFuture()) {
        timeout_ms = static_cast<int>(std::clamp<int64_t>(
            absl::ToInt64Milliseconds(absl::Ceil(next_deadline - now, absl::Milliseconds(1))), 0,
            60'000));
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
        Log(absl::StrCat("poll failed (", Errno(errno), "); the socket is no longer served"));
        return;
      }
      if (fds[0].revents != 0) return;
      if (stop_accepting_.load() && !closed_to_new_requests_.HasBeenNotified()) {
        CloseToNewRequests();
      }
      // Only the connections polled above: Accept() appends new ones.
      const size_t polled = connections_.size();
      if (fds[1].revents != 0) Accept();
      if (fds[2].revents != 0) DeliverLaterReplies();
      for (size_t i = 0; i < polled; i++) {
        Connection& c = *connections_[i];
        const short revents = fds[i + kFirstConnection].revents;
        if (!c.fd.valid() || revents == 0) continue;
        if (c.parked_id != 0) {
          // Hung up while waiting: nobody will take the reply.
          if (revents & (POLLHUP | POLLERR)) Close(c);
          continue;
        }
        if (revents & POLLOUT) {
          Flush(c);
          if (c.fd.valid() && c.out.empty()) Serve(c);
        }
        if (c.fd.valid() && (revents & (POLLIN | POLLHUP | POLLERR)) && c.out.empty()) Read(c);
        // Hung up while its reply was unsent: nobody will take it.
        if (c.fd.valid() && (revents & (POLLHUP | POLLERR)) && !c.out.empty()) Close(c);
      }
      ExpireDeadlines();
      std::erase_if(connections_, [](const auto& c) { return !c->fd.valid(); });
    }
  }

 private:
  // fds[]: the wake eventfd, the listening socket, the mailbox, then the
  // connections.
  static constexpr size_t kFirstConnection = 3;

  // StopAccepting()'s work, on the loop's thread: the listening socket
  // closes (connections still in its backlog see it closed), a connection
  // is closed once the reply it has coming is sent (its parked request's
  // too), and one with none coming is closed now.
  void CloseToNewRequests() {
    listen_fd_.reset();
    for (auto& c : connections_) {
      if (!c->fd.valid()) continue;
      if (c->parked_id != 0 || !c->out.empty()) {
        c->close_after_write = true;
      } else {
        Close(*c);
      }
    }
    closed_to_new_requests_.Notify();
  }

  void Accept() {
    if (!listen_fd_.valid()) return;
    while (true) {
      base::ScopedFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // The pending connection stays readable: wait rather than spin.
          Log(absl::StrCat("cannot accept a connection (", Errno(errno), "); retrying in 100ms"));
          accept_paused_until_ = absl::Now() + absl::Milliseconds(100);
        }
        return;
      }
      struct ucred cred = {};
      socklen_t len = sizeof(cred);
      if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
      const Peer peer{cred.pid, cred.uid, cred.gid};
      if (!Authorized(fd.get(), peer)) {
        Log(absl::StrCat("refused pid ", peer.pid, " (uid ", peer.uid, "): not ", who_may_));
        SendErrorAndClose(std::move(fd),
                          absl::StrCat("permission denied: uid ", peer.uid, " is not ", who_may_));
        continue;
      }
      if (static_cast<int>(connections_.size()) >= options_.max_connections) {
        Log(absl::StrCat("refused pid ", peer.pid, " (uid ", peer.uid,
                         "): ", options_.max_connections, " connections are open already"));
        SendErrorAndClose(std::move(fd),
                          absl::StrCat("the agent is busy: ", options_.max_connections,
                                       " control connections are open already; try again"));
        continue;
      }
      auto c = std::make_unique<Connection>(options_.max_request_bytes);
      c->fd = std::move(fd);
      c->peer = peer;
      c->deadline = absl::Now() + options_.io_timeout;
      connections_.push_back(std::move(c));
    }
  }

  bool Authorized(int fd, const Peer& peer) const {
    if (peer.uid == 0) return true;
    if (!group_.has_value()) return false;
    if (peer.gid == *group_) return true;
    // The peer's supplementary groups as they were when it connected.
    std::vector<gid_t> groups(64);
    socklen_t len = groups.size() * sizeof(gid_t);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
      if (errno != ERANGE) return false;
      groups.resize(len / sizeof(gid_t));
      if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
    }
    groups.resize(len / sizeof(gid_t));
    return std::find(groups.begin(), groups.end(), *group_) != groups.end();
  }

  void Read(Connection& c) {
    char buf[16384];
    const size_t want = std::min(c.reader.room(), sizeof(buf));
    if (want > 0) {
      const ssize_t n = recv(c.fd.get(), buf, want, 0);
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) Close(c);
        return;
      }
      if (n == 0) {
        c.peer_done_sending = true;
      } else {
        c.reader.Append(buf, static_cast<size_t>(n));
      }
    }
    Serve(c);
  }

  // Answers the whole requests read so far, one at a time: the next one only
  // once the previous reply is sent.
  void Serve(Connection& c) {
    std::string payload;
    while (c.fd.valid() && c.out.empty() && !c.close_after_write && c.parked_id == 0) {
      const FrameReader::Result result = c.reader.Next(&payload);
      if (result == FrameReader::Result::kIncomplete) {
        if (c.peer_done_sending) Close(c);
        return;
      }
      control::Reply reply;
      if (result == FrameReader::Result::kTooLarge) {
        Log(absl::StrCat("dropped pid ", c.peer.pid, " (uid ", c.peer.uid, "): a request of ",
                         c.reader.announced_length(), " bytes"));
        reply.set_error(absl::StrCat("request of ", c.reader.announced_length(),
                                     " bytes is larger than the limit of ",
                                     c.reader.max_payload_bytes(), " bytes"));
        c.close_after_write = true;
      } else if (absl::StatusOr<control::Request> request = DecodeRequestUntrusted(payload);
                 !request.ok()) {
        reply.set_error(std::string(request.status().message()));
      } else {
        const absl::Time start = absl::Now();
        const uint64_t id = next_request_id_++;
        ControlHandler::Answer answer =
            handler_->Handle(*request, c.peer, LaterReply(mailbox_, id));
        // Nobody else was served meanwhile: their time does not run.
        const absl::Duration busy = absl::Now() - start;
        for (auto& other : connections_) {
          if (other.get() != &c && other->parked_id == 0) other->deadline += busy;
        }
        if (answer.limit().has_value()) {
          c.parked_id = id;
          c.if_late = std::move(answer.reply());
          c.deadline = absl::Now() + *answer.limit();
          return;
        }
        reply = std::move(answer.reply());
      }
      SendReply(c, reply);
    }
  }

  // Sends `reply` as the answer to the connection's request (its own, or
  // the one it was parked for), and serves its next request once sent.
  void SendReply(Connection& c, const control::Reply& reply) {
    c.parked_id = 0;
    c.out = EncodeFrame(reply);
    c.out_sent = 0;
    c.deadline = absl::Now() + options_.io_timeout;
    Flush(c);
  }

  // The replies handlers gave later, to their parked connections; those of
  // connections gone (hung up, timed out) are dropped.
  void DeliverLaterReplies() {
    uint64_t ignored;
    (void)!read(mailbox_fd_.get(), &ignored, sizeof(ignored));
    std::vector<std::pair<uint64_t, control::Reply>> replies;
    {
      absl::MutexLock lock(&mailbox_->mu);
      replies.swap(mailbox_->replies);
    }
    for (const auto& [id, reply] : replies) {
      for (auto& c : connections_) {
        if (!c->fd.valid() || c->parked_id != id) continue;
        SendReply(*c, reply);
        if (c->fd.valid() && c->out.empty()) Serve(*c);
        break;
      }
    }
  }

  // Sends what the socket takes now of the connection's reply. Does not
  // serve the next request (the caller does), so that a peer's pipelined
  // requests are a loop, not a recursion.
  void Flush(Connection& c) {
    while (c.out_sent < c.out.size()) {
      const ssize_t n = send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        Close(c);
        return;
      }
      c.out_sent += static_cast<size_t>(n);
    }
    std::string().swap(c.out);
    c.out_sent = 0;
    c.deadline = absl::Now() + options_.io_timeout;
    if (c.close_after_write) Close(c);
  }

  void ExpireDeadlines() {
    const absl::Time now = absl::Now();
    for (auto& c : connections_) {
      if (!c->fd.valid() || now < c->deadline) continue;
      if (c->parked_id != 0) {
        SendReply(*c, c->if_late);
        if (c->fd.valid() && c->out.empty()) Serve(*c);
        continue;
      }
      if (!c->out.empty()) {
        Log(absl::StrCat("dropped pid ", c->peer.pid, " (uid ", c->peer.uid,
                         "): did not read its reply within ",
                         absl::FormatDuration(options_.io_timeout)));
      } else if (c->reader.buffered() > 0) {
        Log(absl::StrCat("dropped pid ", c->peer.pid, " (uid ", c->peer.uid,
                         "): its request was not complete within ",
                         absl::FormatDuration(options_.io_timeout)));
      }
      Close(*c);
    }
  }

  static void Close(Connection& c) { c.fd.reset(); }

  // At most kLogBurst lines per kLogWindow, so that a peer that connects in
  // a loop cannot flood the journal; the next line counts what was left out.
  void Log(const std::string& line) {
    if (!options_.log) return;
    static constexpr int kLogBurst = 20;
    static constexpr absl::Duration kLogWindow = absl::Minutes(1);
    const absl::Time now = absl::Now();
    if (now - log_window_start_ >= kLogWindow) {
      log_window_start_ = now;
      log_lines_in_window_ = 0;
    }
    if (log_lines_in_window_ >= kLogBurst) {
      log_suppressed_++;
      return;
    }
    log_lines_in_window_++;
    std::string text = absl::StrCat("control socket: ", line);
    if (log_suppressed_ > 0) {
      absl::StrAppend(&text, " (", log_suppressed_, " similar lines left out before)");
      log_suppressed_ = 0;
    }
    options_.log(text);
  }

  base::ScopedFd listen_fd_;   // None once closed to new requests.
  base::ScopedFd wake_fd_;     // eventfd: the loop ends.
  base::ScopedFd mailbox_fd_;  // eventfd: a LaterReply was sent.
  const std::shared_ptr<LaterReply::Mailbox> mailbox_ = std::make_shared<LaterReply::Mailbox>();
  uint64_t next_request_id_ = 1;
  std::atomic<bool> stop_accepting_{false};
  // Set by the loop once it has closed to new requests (or ended).
  absl::Notification closed_to_new_requests_;
  // Declared before options_, which the constructor moves from.
  const std::optional<gid_t> group_;  // Admitted besides root; none: root only.
  const std::string who_may_;         // "root or in <group>", for refusals.
  const Options options_;
  ControlHandler* const handler_;
  std::vector<std::unique_ptr<Connection>> connections_;
  absl::Time accept_paused_until_ = absl::InfinitePast();
  absl::Time log_window_start_ = absl::InfinitePast();
  int log_lines_in_window_ = 0;
  uint64_t log_suppressed_ = 0;
};

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Listen(const std::string& path,
                                                                     Options options,
                                                                     ControlHandler* handler) {
  return Create(path, std::move(options), handler, nullptr);
}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::ListenForTesting(
    const std::string& path, Options options, ControlHandler* handler,
    const std::function<void()>& after_bind) {
  return Create(path, std::move(options), handler, after_bind);
}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Create(
    const std::string& path, Options options, ControlHandler* handler,
    const std::function<void()>& after_bind) {
  absl::StatusOr<ControlSocket> socket =
      CreateControlSocket(path, options.group, options.replace_stale_socket, after_bind);
  if (!socket.ok()) return socket.status();
  // The socket closed and its file removed; the directory closes after.
  auto fail = [&](absl::Status status) {
    socket->fd.reset();
    unlinkat(socket->dir_fd.get(), socket->name.c_str(), 0);
    return status;
  };
  base::ScopedFd wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd.valid()) return fail(absl::InternalError(absl::StrCat("eventfd: ", Errno(errno))));
  base::ScopedFd mailbox_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!mailbox_fd.valid()) {
    return fail(absl::InternalError(absl::StrCat("eventfd: ", Errno(errno))));
  }

  std::unique_ptr<ControlServer> server(new ControlServer());
  server->path_ = path;
  server->name_ = socket->name;
  server->dir_fd_ = std::move(socket->dir_fd);
  server->group_ = options.group;
  server->socket_dev_ = socket->dev;
  server->socket_ino_ = socket->ino;
  server->loop_ = std::make_unique<Loop>(std::move(socket->fd), std::move(wake_fd),
                                         std::move(mailbox_fd), std::move(options), handler);
  server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  return server;
}

ControlServer::~ControlServer() { Stop(); }

void ControlServer::StopAccepting() {
  if (loop_ == nullptr) return;
  loop_->StopAccepting();
  RemoveSocketFile();
}

void ControlServer::Stop() {
  if (loop_ == nullptr) return;
  loop_->Wake();
  thread_.join();
  loop_.reset();
  RemoveSocketFile();
  dir_fd_.reset();
}

void ControlServer::RemoveSocketFile() {
  struct stat st;
  if (fstatat(dir_fd_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISSOCK(st.st_mode) && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    unlinkat(dir_fd_.get(), name_.c_str(), 0);
  }
}

}  // namespace ringside::agent
