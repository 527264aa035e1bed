#include "agent/lifecycle/systemd_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/scoped_env.h"

namespace ringside::agent {
namespace {

using testing::ScopedEnv;
using testing::ScratchDir;

// What systemd would be: a datagram socket that takes notifications. A
// notification is sent synchronously, so once the call returned it is here
// to read without waiting.
class FakeSystemd {
 public:
  // `name` is a path, or an abstract name when it starts with '\0'.
  explicit FakeSystemd(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), std::min(name.size(), sizeof(addr.sun_path) - 1));
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  }
  ~FakeSystemd() {
    if (fd_ >= 0) close(fd_);
  }
  bool bound() const { return bound_; }

  // The next notification, or "(nothing)" when none is queued.
  std::string Next() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) return "(nothing)";
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class SystemdNotifierTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(systemd_.bound()); }

  // A notifier talking to systemd_.
  SystemdNotifier Notifier() {
    env_.Set("NOTIFY_SOCKET", scratch_.Join("notify"));
    return SystemdNotifier::FromEnvironment();
  }

  ScratchDir scratch_;
  ScopedEnv env_{{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}};
  FakeSystemd systemd_{scratch_.Join("notify")};
};

TEST_F(SystemdNotifierTest, ReadyCarriesStatusAndMainPid) {
  SystemdNotifier notifier = Notifier();
  ASSERT_TRUE(notifier.active());
  notifier.Ready("recording: 3 sources attached");
  EXPECT_EQ(systemd_.Next(),
            absl::StrCat("READY=1\nSTATUS=recording: 3 sources attached\nMAINPID=", getpid()));
  EXPECT_EQ(systemd_.Next(), "(nothing)");
}

TEST_F(SystemdNotifierTest, ReadyStatusIsOneLine) {
  SystemdNotifier notifier = Notifier();
  notifier.Ready("up\nMAINPID=1");
  EXPECT_EQ(systemd_.Next(), absl::StrCat("READY=1\nSTATUS=up MAINPID=1\nMAINPID=", getpid()));
}

TEST_F(SystemdNotifierTest, StatusIsOneLine) {
  SystemdNotifier notifier = Notifier();
  notifier.Status("sched: 12000 events/s\nftrace: off");
  EXPECT_EQ(systemd_.Next(), "STATUS=sched: 12000 events/s ftrace: off");
}

TEST_F(SystemdNotifierTest, StoppingSaysStopping) {
  SystemdNotifier notifier = Notifier();
  notifier.Stopping();
  EXPECT_EQ(systemd_.Next(), "STOPPING=1");
}

TEST_F(SystemdNotifierTest, WatchdogSaysWatchdog) {
  SystemdNotifier notifier = Notifier();
  notifier.Watchdog();
  EXPECT_EQ(systemd_.Next(), "WATCHDOG=1");
}

TEST_F(SystemdNotifierTest, ReloadingCarriesTheMonotonicTime) {
  SystemdNotifier notifier = Notifier();
  auto monotonic_usec = [] {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  };
  const uint64_t before = monotonic_usec();
  notifier.Reloading();
  const uint64_t after = monotonic_usec();
  const std::string got = systemd_.Next();
  absl::string_view rest = got;
  ASSERT_TRUE(absl::ConsumePrefix(&rest, "RELOADING=1\nMONOTONIC_USEC=")) << got;
  uint64_t usec = 0;
  ASSERT_TRUE(absl::SimpleAtoi(rest, &usec)) << got;
  EXPECT_GE(usec, before);
  EXPECT_LE(usec, after);
}

TEST_F(SystemdNotifierTest, WatchdogIntervalIsHalfOfWatchdogUsecForOurPid) {
  env_.Set("WATCHDOG_USEC", "2000000");
  env_.Set("WATCHDOG_PID", absl::StrCat(getpid()));
  EXPECT_EQ(Notifier().watchdog_interval(), absl::Seconds(1));
}

TEST_F(SystemdNotifierTest, WatchdogWithoutPidIsOurs) {
  env_.Set("WATCHDOG_USEC", "3000000");
  EXPECT_EQ(Notifier().watchdog_interval(), absl::Milliseconds(1500));
}

TEST_F(SystemdNotifierTest, WatchdogOfAnotherPidIsNotOurs) {
  env_.Set("WATCHDOG_USEC", "2000000");
  env_.Set("WATCHDOG_PID", absl::StrCat(getpid() == 1 ? 2 : 1));
  EXPECT_EQ(Notifier().watchdog_interval(), std::nullopt);
}

TEST_F(SystemdNotifierTest, NoWatchdogWithoutWatchdogUsec) {
  EXPECT_EQ(Notifier().watchdog_interval(), std::nullopt);
}

TEST_F(SystemdNotifierTest, WithoutNotifySocketInactiveAndSilent) {
  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();
  EXPECT_FALSE(notifier.active());
  notifier.Ready("up");
  notifier.Status("fine");
  notifier.Reloading();
  notifier.Watchdog();
  notifier.Stopping();
  EXPECT_EQ(systemd_.Next(), "(nothing)");
  EXPECT_EQ(notifier.failed_sends(), 0);
}

TEST_F(SystemdNotifierTest, AbstractSocketNameIsSupported) {
  const std::string name = absl::StrCat("ringside-notify-test-", getpid());
  FakeSystemd abstract_systemd(std::string(1, '\0') + name);
  ASSERT_TRUE(abstract_systemd.bound());
  env_.Set("NOTIFY_SOCKET", "@" + name);
  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();
  notifier.Stopping();
  EXPECT_EQ(abstract_systemd.Next(), "STOPPING=1");
  EXPECT_EQ(notifier.failed_sends(), 0);
}

TEST_F(SystemdNotifierTest, UnreachableSocketIsCountedNotFatal) {
  env_.Set("NOTIFY_SOCKET", scratch_.Join("nobody-listens"));
  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();
  ASSERT_TRUE(notifier.active());
  notifier.Ready("up");
  notifier.Watchdog();
  EXPECT_EQ(notifier.failed_sends(), 2);
}

}  // namespace
}  // namespace ringside::agent
