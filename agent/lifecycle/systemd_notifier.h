#ifndef RINGSIDE_AGENT_LIFECYCLE_SYSTEMD_NOTIFIER_H_
#define RINGSIDE_AGENT_LIFECYCLE_SYSTEMD_NOTIFIER_H_

#include <atomic>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::agent {

// Tells systemd how the agent is doing (sd_notify(3)): ready, a one-line
// status, reloading, stopping, watchdog keep-alives. Outside systemd
// (NOTIFY_SOCKET unset) every call is a no-op, so the daemon calls it
// unconditionally.
//
// A notification that cannot be sent is counted, never fatal: the agent
// keeps recording whether or not its supervisor listens.
//
// Each call reads NOTIFY_SOCKET again (libsystemd does), so the environment
// must not change after FromEnvironment(). Thread-safe (the watchdog may be
// fed from another thread than the one reporting status): each notification
// is one datagram.
class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID; the environment is
  // left as it is (children the agent starts inherit it).
  static SystemdNotifier FromEnvironment();
  SystemdNotifier(const SystemdNotifier& other);
  SystemdNotifier& operator=(const SystemdNotifier& other);

  // False when NOTIFY_SOCKET is unset: nothing is ever sent.
  bool active() const { return active_; }

  // "READY=1\nSTATUS=<status>\nMAINPID=<our pid>": send only once the agent
  // is recording, since systemd then starts the units ordered after it.
  void Ready(absl::string_view status);
  // "STATUS=<status>", newlines replaced by spaces (systemctl shows one line).
  void Status(absl::string_view status);
  // "RELOADING=1\nMONOTONIC_USEC=<now>": systemd 253+ needs the timestamp
  // for Type=notify-reload; older ones ignore it. Send READY=1 (Ready())
  // when the reload is done.
  void Reloading();
  // "STOPPING=1".
  void Stopping();
  // Half of WATCHDOG_USEC, how often to call Watchdog(), when the unit set
  // WatchdogSec for this process; nullopt otherwise.
  std::optional<absl::Duration> watchdog_interval() const { return watchdog_interval_; }
  // "WATCHDOG=1".
  void Watchdog();

  // Notifications sd_notify() failed to send.
  int failed_sends() const { return failed_sends_.load(std::memory_order_relaxed); }

 private:
  SystemdNotifier() = default;
  void Send(const std::string& message);

  bool active_ = false;
  std::optional<absl::Duration> watchdog_interval_;
  std::atomic<int> failed_sends_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_LIFECYCLE_SYSTEMD_NOTIFIER_H_
