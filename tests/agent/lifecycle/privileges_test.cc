#include "agent/lifecycle/privileges.h"

#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

TEST(CapabilitiesToKeepTest, OnlyWhatRecordingStillNeeds) {
  struct Case {
    bool output_group;
    const char* release;
    int unprivileged_bpf_disabled;
    CapabilityMask want;
  } cases[] = {
      // 6.5 and later check unprivileged_bpf_disabled only when creating.
      {false, "6.18.44-fc-v509", 2, 0},
      {false, "6.5.0", 1, 0},
      {true, "6.12.0-amd64", 2, CapabilityBit(CAP_CHOWN)},
      // Before, every bpf() command, so the drop counters' lookups need it.
      {false, "6.1.0-13-amd64", 2, CapabilityBit(CAP_BPF)},
      {true, "5.10.0", 1, CapabilityBit(CAP_BPF) | CapabilityBit(CAP_CHOWN)},
      {false, "5.10.0", 0, 0},
      // A release we cannot read: assume the old rule.
      {false, "weird", 2, CapabilityBit(CAP_BPF)},
      {false, "", 0, 0},
  };
  for (const Case& c : cases) {
    KeptCapabilities needs;
    needs.output_group = c.output_group;
    needs.kernel_release = c.release;
    needs.unprivileged_bpf_disabled = c.unprivileged_bpf_disabled;
    EXPECT_EQ(CapabilitiesToKeep(needs), c.want)
        << c.release << " disabled=" << c.unprivileged_bpf_disabled
        << " output_group=" << c.output_group;
  }
}

TEST(CapabilityNamesTest, NamesEachBit) {
  EXPECT_EQ(CapabilityNames(0), "none");
  EXPECT_EQ(CapabilityNames(CapabilityBit(CAP_CHOWN)), "CAP_CHOWN");
  EXPECT_EQ(CapabilityNames(CapabilityBit(CAP_BPF) | CapabilityBit(CAP_PERFMON) |
                            CapabilityBit(CAP_SYS_ADMIN)),
            "CAP_SYS_ADMIN,CAP_PERFMON,CAP_BPF");
  EXPECT_EQ(CapabilityNames(CapabilityBit(50)), "capability 50");
}

TEST(ParseThreadStatusTest, ReadsTheCapabilityLines) {
  absl::StatusOr<ThreadCapabilities> t = ParseThreadStatus(
      "Name:\tringside\nPid:\t4242\nNoNewPrivs:\t1\nCapInh:\t0000000000000000\n"
      "CapPrm:\t0000000000000001\nCapEff:\t0000000000000001\nCapBnd:\t000001ffffffffff\n"
      "CapAmb:\t0000000000000000\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tid, 4242);
  EXPECT_EQ(t->effective, 1u);
  EXPECT_EQ(t->permitted, 1u);
  EXPECT_EQ(t->bounding, 0x1ffffffffffu);
  EXPECT_TRUE(t->no_new_privs);
  EXPECT_FALSE(ParseThreadStatus("Name:\tx\n").ok());
  EXPECT_FALSE(ParseThreadStatus("CapInh:\tzz\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\n").ok());
}

// The drop fails a thread only while it holds the signal back. A thread
// running the handler has the signal blocked too, but no longer pending:
// taken for one that refuses it, a thread whose handler a long vfork wait
// had postponed failed the drop just as it answered.
TEST(HoldsSignalBackTest, BlockedAndPendingOnly) {
  const int rtmax = 64;
  const std::string blocked = "SigBlk:\t8000000000000000\n";
  const std::string pending = "SigPnd:\t8000000000000000\n";
  EXPECT_TRUE(HoldsSignalBack("Name:\tx\n" + pending + "ShdPnd:\t0\n" + blocked, rtmax));
  // In the handler: blocked, no longer pending.
  EXPECT_FALSE(HoldsSignalBack("SigPnd:\t0000000000000000\n" + blocked, rtmax));
  // Pending and not blocked: the handler is about to run.
  EXPECT_FALSE(HoldsSignalBack(pending + "SigBlk:\t7fffffffffffffff\n", rtmax));
  // Another signal held back is not this one.
  EXPECT_FALSE(HoldsSignalBack("SigPnd:\t0000000000000001\nSigBlk:\tffffffffffffffff\n", rtmax));
  // Unreadable: nothing is known to be held back.
  EXPECT_FALSE(HoldsSignalBack("", rtmax));
  EXPECT_FALSE(HoldsSignalBack(blocked, rtmax));
  EXPECT_FALSE(HoldsSignalBack("SigPnd:\tzz\n" + blocked, rtmax));
}

// Runs `body` in a forked child and returns its exit status: the drop is
// for good, so it cannot happen in the test process.
int InChild(int (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// Threads blocked in the calls the agent's threads block in.
std::vector<std::thread> StartBlockedThreads(std::atomic<bool>* stop) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([stop] {
      while (!stop->load()) poll(nullptr, 0, 50);
    });
  }
  threads.emplace_back([stop] {
    while (!stop->load()) usleep(20000);
  });
  return threads;
}

TEST(DropCapabilitiesTest, EveryThreadDropsAndCannotGainThemBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (capabilities to drop)";
  const int code = InChild([] {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads = StartBlockedThreads(&stop);
    const absl::Status st = DropCapabilities(CapabilityBit(CAP_CHOWN));
    if (!st.ok()) return 1;
    absl::StatusOr<std::vector<ThreadCapabilities>> all = ReadThreadCapabilities(0);
    if (!all.ok() || all->size() != 5) return 2;
    for (const ThreadCapabilities& t : *all) {
      if (t.effective != CapabilityBit(CAP_CHOWN) || t.permitted != CapabilityBit(CAP_CHOWN) ||
          t.ambient != 0 || t.inheritable != 0 || !t.no_new_privs) {
        return 3;
      }
    }
    // Dropped for good: a thread started now inherits the lowered sets,
    // and what was given up cannot be asked back.
    int from_new_thread = -1;
    std::thread([&] {
      absl::StatusOr<std::vector<ThreadCapabilities>> again = ReadThreadCapabilities(0);
      from_new_thread = again.ok() && again->size() == 6 ? 0 : 4;
      for (const ThreadCapabilities& t : *again) {
        if (t.effective != CapabilityBit(CAP_CHOWN)) from_new_thread = 5;
      }
    }).join();
    if (from_new_thread != 0) return from_new_thread;
    if (setuid(0) != 0) return 6;  // Still uid 0: allowed, and gains nothing.
    if (DropCapabilities(CapabilityBit(CAP_CHOWN) | CapabilityBit(CAP_SYS_ADMIN)).ok()) {
      // Asking to keep more than is left keeps only what is left.
      absl::StatusOr<std::vector<ThreadCapabilities>> after = ReadThreadCapabilities(0);
      if (!after.ok() || (*after)[0].effective != CapabilityBit(CAP_CHOWN)) return 7;
    }
    stop = true;
    for (std::thread& t : threads) t.join();
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(DropCapabilitiesTest, AThreadThatCannotAnswerFailsTheDropNamingIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (capabilities to drop)";
  const int code = InChild([] {
    std::atomic<bool> stop{false}, deaf_now{false};
    std::thread deaf([&] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      deaf_now = true;
      while (!stop.load()) usleep(10000);
    });
    // Not a fixed sleep: on a loaded machine the thread could still be
    // listening after it, answer the drop, and let it succeed.
    while (!deaf_now.load()) usleep(1000);
    const absl::Status st = DropCapabilities(0);
    stop = true;
    deaf.join();
    if (st.ok()) return 1;
    return absl::StrContains(st.message(), "did not drop its capabilities") ? 0 : 2;
  });
  EXPECT_EQ(code, 0) << (code == 1 ? "the drop succeeded though a thread blocked every signal"
                                   : "the drop failed without naming the thread that did not drop");
}

// A thread whose handler the kernel holds back for longer than the old 2 s
// limit (a vfork waits uninterruptibly for its child, as an fsync on a busy
// disk does): the drop waits for it. Before, the agent's start failed this
// way on a loaded machine ("did not drop its capabilities within 2 s").
TEST(DropCapabilitiesTest, AThreadInALongUninterruptibleWaitIsWaitedFor) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (capabilities to drop)";
  const int code = InChild([] {
    std::atomic<pid_t> tid{0};
    std::thread held([&] {
      tid = static_cast<pid_t>(syscall(SYS_gettid));
      // The child shares our memory until it exits: a raw sleep, then exit.
      if (vfork() == 0) {
        const struct timespec three_s = {3, 0};
        syscall(SYS_nanosleep, &three_s, nullptr);
        syscall(SYS_exit, 0);
      }
      wait(nullptr);
    });
    while (tid.load() == 0) usleep(1000);
    // Into the vfork wait (state D), or the test would prove nothing.
    bool in_wait = false;
    for (int i = 0; i < 2000 && !in_wait; i++) {
      std::ifstream stat("/proc/self/task/" + std::to_string(tid.load()) + "/stat");
      const std::string line((std::istreambuf_iterator<char>(stat)), {});
      const size_t paren = line.rfind(')');
      in_wait = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'D';
      if (!in_wait) usleep(1000);
    }
    if (!in_wait) return 3;
    const absl::Status st = DropCapabilities(0);
    held.join();
    if (!st.ok()) {
      fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      return 1;
    }
    absl::StatusOr<std::vector<ThreadCapabilities>> all = ReadThreadCapabilities(0);
    return all.ok() && (*all)[0].effective == 0 ? 0 : 2;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace ringside::agent
