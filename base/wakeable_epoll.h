#ifndef RINGSIDE_BASE_WAKEABLE_EPOLL_H_
#define RINGSIDE_BASE_WAKEABLE_EPOLL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace ringside::base {

// An epoll set with an eventfd in it, for a thread that sleeps in
// epoll_wait() until one of its fds is ready or another thread wakes it
// (to stop). The eventfd's events carry kWakeToken as their data; add the
// other fds with data of your own.
struct WakeableEpoll {
  static constexpr uint64_t kWakeToken = ~uint64_t{0};

  static absl::StatusOr<WakeableEpoll> Make();
  // From any thread: the next epoll_wait() returns the wake event.
  void Wake() const;
  // Adds `fd` for `events` with `data` (not kWakeToken).
  absl::Status Add(int fd, uint32_t events, uint64_t data) const;

  ScopedFd epoll;
  ScopedFd wake;
};

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_WAKEABLE_EPOLL_H_
