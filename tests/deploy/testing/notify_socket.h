#ifndef RINGSIDE_TESTS_DEPLOY_TESTING_NOTIFY_SOCKET_H_
#define RINGSIDE_TESTS_DEPLOY_TESTING_NOTIFY_SOCKET_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringside::deploy_testing {

// A unix datagram socket at `path` standing in for systemd's
// /run/systemd/notify (sd_notify's NOTIFY_SOCKET).
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Datagrams until one has `line` as a whole line ("READY=1"): true when it
  // came within `timeout`, false after it or as soon as `give_up` returns
  // true. Every datagram received is kept in received().
  bool WaitFor(const std::string& line, absl::Duration timeout,
               const std::function<bool()>& give_up);
  const std::vector<std::string>& received() const { return received_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> received_;
};

}  // namespace ringside::deploy_testing

#endif  // RINGSIDE_TESTS_DEPLOY_TESTING_NOTIFY_SOCKET_H_
