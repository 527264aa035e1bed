#include "tests/deploy/testing/notify_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace ringside::deploy_testing {

NotifySocket::NotifySocket(const std::string& path) : path_(path) {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd_ < 0 || path.size() >= sizeof(addr.sun_path)) return;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
}

bool NotifySocket::WaitFor(const std::string& line, absl::Duration timeout,
                           const std::function<bool()>& give_up) {
  const absl::Time deadline = absl::Now() + timeout;
  while (fd_ >= 0 && absl::Now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    const absl::Duration wait = std::min(deadline - absl::Now(), absl::Milliseconds(100));
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) {
      if (give_up && give_up()) return false;
      continue;
    }
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) continue;
    received_.emplace_back(buf, static_cast<size_t>(n));
    for (absl::string_view l : absl::StrSplit(received_.back(), '\n')) {
      if (l == line) return true;
    }
  }
  return false;
}

}  // namespace ringside::deploy_testing
