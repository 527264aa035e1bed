#include "agent/control/control_client.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/control/control_frame.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

// Waits for `events` on `fd` until `deadline`; false when it passed.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p = {fd, events, 0};
    const int timeout_ms = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 60'000));
    const int n = poll(&p, 1, timeout_ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // The next call reports the error.
  }
}

absl::Status ConnectError(const std::string& path, int err) {
  if (err == ENOENT || err == ECONNREFUSED || err == ENOTDIR) {
    return absl::UnavailableError(absl::StrCat("no ringside agent is listening on ", path,
                                               err == ENOENT ? " (no such file)" : ""));
  }
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(
        absl::StrCat("permission denied on ", path,
                     ": only root and members of the agent's control group may use it"));
  }
  if (err == ENOTSOCK) {
    return absl::UnavailableError(
        absl::StrCat("no ringside agent is listening on ", path, " (not a socket)"));
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to ", path, ": ", strerror(err)));
}

absl::Status TimedOut(const std::string& path, absl::Duration timeout, const char* doing) {
  return absl::DeadlineExceededError(absl::StrCat("the agent on ", path, " did not ", doing,
                                                  " within ", absl::FormatDuration(timeout)));
}

}  // namespace

absl::StatusOr<control::Reply> CallAgent(const std::string& socket_path,
                                         const control::Request& request, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path '", socket_path,
                                                   "' is not 1 to ", sizeof(addr.sun_path) - 1,
                                                   " bytes long"));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

  base::ScopedFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", strerror(errno)));
  // A non-blocking unix connect() fails with EAGAIN while the agent's
  // backlog is full (it is busy): try again until the deadline.
  while (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return ConnectError(socket_path, errno);
    if (absl::Now() >= deadline) return TimedOut(socket_path, timeout, "accept the connection");
    absl::SleepFor(std::min(absl::Milliseconds(10), deadline - absl::Now()));
  }

  const std::string frame = EncodeFrame(request);
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) break;  // Its answer may say why.
    if (errno != EAGAIN) {
      return absl::UnavailableError(
          absl::StrCat("cannot send to the agent on ", socket_path, ": ", strerror(errno)));
    }
    if (!WaitFor(fd.get(), POLLOUT, deadline)) {
      return TimedOut(socket_path, timeout, "take the request");
    }
  }

  FrameReader reader(kMaxReplyBytes);
  std::string payload;
  char buf[16384];
  while (true) {
    const FrameReader::Result result = reader.Next(&payload);
    if (result == FrameReader::Result::kComplete) break;
    if (result == FrameReader::Result::kTooLarge) {
      return absl::DataLossError(absl::StrCat("the agent on ", socket_path, " sent a reply of ",
                                              reader.announced_length(),
                                              " bytes, over the limit of ", kMaxReplyBytes));
    }
    const ssize_t n = recv(fd.get(), buf, std::min(sizeof(buf), reader.room()), 0);
    if (n > 0) {
      reader.Append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      return absl::UnavailableError(
          absl::StrCat("the agent on ", socket_path, " closed the connection before replying",
                       n == 0 ? "" : absl::StrCat(" (", strerror(errno), ")")));
    } else if (errno == EAGAIN && !WaitFor(fd.get(), POLLIN, deadline)) {
      return TimedOut(socket_path, timeout, "reply");
    }
  }
  control::Reply reply;
  if (!reply.ParseFromString(payload)) {
    return absl::DataLossError(absl::StrCat("the agent on ", socket_path, " sent a reply of ",
                                            payload.size(), " bytes that does not parse"));
  }
  return reply;
}

}  // namespace ringside::agent
