#include "base/wakeable_epoll.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/status.h"

namespace ringside::base {

absl::StatusOr<WakeableEpoll> WakeableEpoll::Make() {
  WakeableEpoll w;
  w.epoll = ScopedFd(epoll_create1(EPOLL_CLOEXEC));
  if (!w.epoll.valid()) return ErrnoToStatus(errno, "epoll_create1");
  w.wake = ScopedFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!w.wake.valid()) return ErrnoToStatus(errno, "eventfd");
  if (absl::Status st = w.Add(w.wake.get(), EPOLLIN, kWakeToken); !st.ok()) return st;
  return w;
}

void WakeableEpoll::Wake() const {
  const uint64_t one = 1;
  (void)!write(wake.get(), &one, sizeof(one));
}

absl::Status WakeableEpoll::Add(int fd, uint32_t events, uint64_t data) const {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = data;
  if (epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoToStatus(errno, "epoll_ctl");
  return absl::OkStatus();
}

}  // namespace ringside::base
