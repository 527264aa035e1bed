#include "agent/lifecycle/systemd_notifier.h"

#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

std::string OneLine(absl::string_view text) {
  std::string line(text);
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

}  // namespace

SystemdNotifier SystemdNotifier::FromEnvironment() {
  SystemdNotifier notifier;
  const char* socket = getenv("NOTIFY_SOCKET");
  notifier.active_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // Also checks WATCHDOG_PID: a watchdog set for our parent is not ours.
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0 && usec > 0) {
    notifier.watchdog_interval_ = absl::Microseconds(usec) / 2;
  }
  return notifier;
}

SystemdNotifier::SystemdNotifier(const SystemdNotifier& other)
    : active_(other.active_),
      watchdog_interval_(other.watchdog_interval_),
      failed_sends_(other.failed_sends()) {}

SystemdNotifier& SystemdNotifier::operator=(const SystemdNotifier& other) {
  active_ = other.active_;
  watchdog_interval_ = other.watchdog_interval_;
  failed_sends_.store(other.failed_sends(), std::memory_order_relaxed);
  return *this;
}

void SystemdNotifier::Send(const std::string& message) {
  if (!active_) return;
  // sd_notify() returns 0 when NOTIFY_SOCKET vanished meanwhile: nothing to
  // count then, we are not supervised.
  if (sd_notify(/*unset_environment=*/0, message.c_str()) < 0) {
    failed_sends_.fetch_add(1, std::memory_order_relaxed);
  }
}

void SystemdNotifier::Ready(absl::string_view status) {
  Send(absl::StrCat("READY=1\nSTATUS=", OneLine(status), "\nMAINPID=", getpid()));
}

void SystemdNotifier::Status(absl::string_view status) {
  Send(absl::StrCat("STATUS=", OneLine(status)));
}

void SystemdNotifier::Reloading() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t now_usec =
      static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  Send(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", now_usec));
}

void SystemdNotifier::Stopping() { Send("STOPPING=1"); }

void SystemdNotifier::Watchdog() { Send("WATCHDOG=1"); }

}  // namespace ringside::agent
