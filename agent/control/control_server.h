#ifndef RINGSIDE_AGENT_CONTROL_CONTROL_SERVER_H_
#define RINGSIDE_AGENT_CONTROL_CONTROL_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/scoped_fd.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// Who is on the other end of a connection, from SO_PEERCRED at connect time.
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A reply given after ControlHandler::Handle() returned (Answer::Later()).
// Copies stand for the same request. Send() may be called from any thread,
// at any time: the first call is the request's reply; later ones, and any
// after the connection was dropped, its limit passed or the server stopped,
// are dropped. Holding one keeps nothing of the server's but a mailbox.
class LaterReply {
 public:
  void Send(control::Reply reply) const;

 private:
  friend class ControlServer;
  struct Mailbox;
  LaterReply(std::shared_ptr<Mailbox> mailbox, uint64_t id)
      : mailbox_(std::move(mailbox)), id_(id) {}

  std::shared_ptr<Mailbox> mailbox_;
  uint64_t id_ = 0;  // The request's, unique in its server.
};

// What the agent does with a request. Called on the server's thread, one
// request at a time, for peers that passed the permission check only.
class ControlHandler {
 public:
  // The answer to a request: its reply now, or the promise of one.
  class Answer {
   public:
    // Answered now. Implicit, so that a handler returns a Reply as it is.
    Answer(control::Reply reply) : reply_(std::move(reply)) {}  // NOLINT
    // Answered later, through the LaterReply given to Handle(); when that
    // has not come within `limit`, the peer gets `if_late` instead.
    static Answer Later(absl::Duration limit, control::Reply if_late) {
      Answer answer(std::move(if_late));
      answer.limit_ = limit;
      return answer;
    }
    // Set for Later(): how long the peer waits.
    const std::optional<absl::Duration>& limit() const { return limit_; }
    // The reply now; for Later(), the one sent once the limit passes.
    control::Reply& reply() { return reply_; }

   private:
    control::Reply reply_;
    std::optional<absl::Duration> limit_;
  };

  virtual ~ControlHandler() = default;
  // The answer to `request` (exactly one of its kinds is set). A failure is
  // a Reply with `error` set. A request that waits for something (a
  // snapshot for its file) must not block here: it keeps `later` and
  // returns Answer::Later(); `later` may be used before Handle() returns.
  virtual Answer Handle(const control::Request& request, const Peer& peer,
                        const LaterReply& later) = 0;
};

// The agent's control socket: a unix stream socket that takes Requests and
// answers Replies (framing in control_frame.h), for `ringside status`,
// `snapshot`, `stop`.
//
// Who may talk to it, checked twice: the file is mode 0660 owned by the
// agent's user and the control group, so others cannot connect; and every
// accepted connection's SO_PEERCRED must be uid 0 or have the control group
// as its gid or one of its supplementary groups (SO_PEERGROUPS), so a
// socket whose mode was loosened still refuses them. A refused peer gets one
// Reply{error: "permission denied: ..."}, is closed and is logged.
//
// A peer can never make the agent stop, block or grow:
//   - every socket is non-blocking, served by one poll() loop;
//   - a request is at most max_request_bytes (a larger announced length is
//     answered with an error and the connection closed, without reading or
//     allocating it); a connection holds at most one request and one reply
//     at a time (it is not read while its reply is unsent);
//   - at most max_connections at once (one more gets an error and is closed);
//   - a connection that does not complete its request, or does not take its
//     reply, within io_timeout is dropped, and so is one idle that long;
//   - a request that does not parse gets Reply{error: "malformed request..."}
//     and the connection goes on with the next one.
//
// Requests are handled in arrival order on the server's own thread, and a
// reply the handler gives at once is sent when it returns. A request it
// answers later (a snapshot that waits for its file) parks its connection:
// not read, not answered, not timed out by io_timeout but by the handler's
// limit, still counted in max_connections, dropped if the peer hangs up;
// the loop is woken (an eventfd in its poll set) when the reply comes and
// sends it, while every other connection is served meanwhile.
// The time a handler takes does not count against any other connection's
// io_timeout.
//
// Shutting down comes in two steps, so that a parked request gets its real
// answer when its work finishes during the shutdown (a `snapshot --wait`
// whose file the agent writes before it exits): StopAccepting() takes no
// new connection nor request, but parked connections still get their
// replies; Stop() then answers those still parked with an error saying the
// agent is stopping.
//
// Thread-safety: Listen(), StopAccepting() and Stop() from one thread; the
// handler runs on the server's thread and must not call them;
// LaterReply::Send() from any.
class ControlServer {
 public:
  struct Options {
    // The group allowed to use the socket besides root, and the group the
    // socket file is given. Unset: root only (the file keeps the agent's
    // own group, whose members the check still refuses).
    std::optional<gid_t> group;
    // There is a socket file at the path already, and the caller knows (from
    // its lock) that no agent owns it: replace it. Never replaces anything
    // but a socket.
    bool replace_stale_socket = false;
    uint32_t max_request_bytes = 64 * 1024;
    int max_connections = 16;
    absl::Duration io_timeout = absl::Seconds(5);
    // Refused and dropped peers, one line each ("control socket: ..."), at
    // most 20 a minute. Called on the server's thread. Unset: not logged.
    std::function<void(absl::string_view)> log;
  };

  // Creates the socket at `path` (mode 0660, group as above) and starts
  // serving it on a thread of its own. Its directory is opened without
  // following a symlink and must be owned by the agent's user and writable
  // by no one else (CheckOnlyWeCanWrite, as the run directory): the file is
  // made, given its group and mode, and removed in that directory only, by
  // name, never following a symlink.
  // Errors: kInvalidArgument for a path too long for a unix socket;
  // kFailedPrecondition when `path` is something other than a socket
  // (naming what: a regular file, a symlink, a directory...), which is left
  // untouched, or when its directory is a symlink, is another user's or can
  // be written by others (naming it); kAlreadyExists when it is a socket and
  // replace_stale_socket is false; kNotFound when its directory does not
  // exist; others from the system calls, naming the path.
  // REQUIRES: `handler` outlives the server.
  static absl::StatusOr<std::unique_ptr<ControlServer>> Listen(const std::string& path,
                                                               Options options,
                                                               ControlHandler* handler);
  // Listen(), calling `after_bind` once the socket file exists and before
  // its group and mode are set, to swap something in at its name.
  static absl::StatusOr<std::unique_ptr<ControlServer>> ListenForTesting(
      const std::string& path, Options options, ControlHandler* handler,
      const std::function<void()>& after_bind);
  // Stop()s.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Closes the socket to new connections and removes its file (as Stop()
  // does); closes every connection but those with a reply still to come
  // (their request parked, or its reply being sent), which are closed once
  // it is sent; the handler is called no more. The server's thread does it;
  // this returns once it has, so a handler the thread was running meanwhile
  // has returned. Idempotent; Stop() after it is still needed.
  void StopAccepting();
  // Closes every connection and the socket, waits for the thread, and
  // removes the socket file if it is still the one Listen() created (same
  // device and inode). A parked connection gets its reply if the handler
  // gave it by now, else an error saying the agent is stopping. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }
  // The group the permission check admits besides root; none: root only.
  std::optional<gid_t> group() const { return group_; }

 private:
  class Loop;
  ControlServer() = default;
  static absl::StatusOr<std::unique_ptr<ControlServer>> Create(
      const std::string& path, Options options, ControlHandler* handler,
      const std::function<void()>& after_bind);
  // Removes the socket file if it is still the one Listen() created (same
  // device and inode).
  void RemoveSocketFile();

  std::string path_;
  std::string name_;       // The socket file's name in its directory.
  base::ScopedFd dir_fd_;  // Its directory, opened and checked by Listen().
  std::optional<gid_t> group_;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONTROL_CONTROL_SERVER_H_
