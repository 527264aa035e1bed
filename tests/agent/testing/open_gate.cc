#include "tests/agent/testing/open_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::agent::testing {
namespace {

void Answer(int fanotify_fd, int event_fd, bool allow) {
  fanotify_response response = {};
  response.fd = event_fd;
  response.response = allow ? FAN_ALLOW : FAN_DENY;
  (void)!write(fanotify_fd, &response, sizeof(response));
  close(event_fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenGate>> OpenGate::Create(const std::string& dir, pid_t pid) {
  const int fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, "fanotify_init");
  if (fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN_PERM | FAN_EVENT_ON_CHILD, AT_FDCWD, dir.c_str()) !=
      0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("fanotify_mark ", dir));
  }
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    close(fd);
    return absl::ErrnoToStatus(errno, "eventfd");
  }
  std::unique_ptr<OpenGate> gate(new OpenGate(fd, stop_fd, pid));
  gate->thread_ = std::thread([g = gate.get()] { g->Serve(); });
  return gate;
}

OpenGate::OpenGate(int fanotify_fd, int stop_fd, pid_t pid)
    : fanotify_fd_(fanotify_fd), stop_fd_(stop_fd), pid_(pid) {}

OpenGate::~OpenGate() {
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  thread_.join();
  Release(true);
  close(fanotify_fd_);
  close(stop_fd_);
}

absl::StatusOr<std::string> OpenGate::WaitHeld(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&was_held_), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no open by pid ", pid_, " within ", absl::FormatDuration(timeout)));
  }
  return held_path_;
}

void OpenGate::Release(bool allow) {
  absl::MutexLock lock(&mu_);
  if (held_fd_ < 0) return;
  Answer(fanotify_fd_, held_fd_, allow);
  held_fd_ = -1;
}

void OpenGate::Serve() {
  alignas(fanotify_event_metadata) char buf[8192];
  while (true) {
    pollfd fds[2] = {{fanotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    const ssize_t n = read(fanotify_fd_, buf, sizeof(buf));
    if (n <= 0) continue;
    const auto* event = reinterpret_cast<const fanotify_event_metadata*>(buf);
    for (ssize_t left = n; FAN_EVENT_OK(event, left); event = FAN_EVENT_NEXT(event, left)) {
      if (event->fd < 0) continue;
      absl::MutexLock lock(&mu_);
      if (was_held_ || event->pid != pid_) {
        Answer(fanotify_fd_, event->fd, true);
        continue;
      }
      char path[4096] = {};
      (void)!readlink(absl::StrCat("/proc/self/fd/", event->fd).c_str(), path, sizeof(path) - 1);
      held_fd_ = event->fd;
      held_path_ = path;
      was_held_ = true;
    }
  }
}

}  // namespace ringside::agent::testing
