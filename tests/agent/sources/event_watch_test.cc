#include "agent/sources/event_watch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

class Hits : public EventListener {
 public:
  void OnEventHit(const EventHit& hit) override {
    absl::MutexLock lock(&mu_);
    hits_.push_back(hit);
  }
  std::vector<EventHit> Await(absl::Duration limit) {
    absl::MutexLock lock(&mu_);
    auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hits_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&some), limit);
    return hits_;
  }

 private:
  absl::Mutex mu_;
  std::vector<EventHit> hits_ ABSL_GUARDED_BY(mu_);
};

// Runs `path` and waits for it.
void Exec(const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
}

TEST(EventWatchTest, ALineGivesItsTimeAndItsTaskCpuAndFields) {
  const std::optional<EventWatch::Line> l = EventWatch::ParseLine(
      "            bash-1234    [001] d..2.  1234.567890: sched_process_exec: "
      "filename=/bin/true pid=1234 old_pid=1234");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->boottime_ns, 1234567890000);
  EXPECT_EQ(l->text,
            "bash-1234    [001] sched_process_exec: filename=/bin/true pid=1234 "
            "old_pid=1234");
}

TEST(EventWatchTest, ATaskNameWithColonsAndNanosecondTimesRead) {
  const std::optional<EventWatch::Line> l =
      EventWatch::ParseLine("  kworker/0:1H-77 [000] ..... 5.000000001: block_rq_complete: 8,0 W");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->boottime_ns, 5000000001);
  EXPECT_EQ(l->text, "kworker/0:1H-77 [000] block_rq_complete: 8,0 W");
}

TEST(EventWatchTest, WhatIsNotAnEventLineIsNone) {
  EXPECT_FALSE(EventWatch::ParseLine("").has_value());
  EXPECT_FALSE(EventWatch::ParseLine("CPU:1 [LOST 12 EVENTS]").has_value());
  EXPECT_FALSE(EventWatch::ParseLine("a: b: c").has_value());
}

// The kernel's filter passes the exec of one program only: the watch fires
// once for it, naming it, and never for the exec before it.
TEST(EventWatchTest, AFilteredExecFiresForThatExecOnly) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string dir = ::testing::TempDir() + "/event-watch";
  std::filesystem::create_directories(dir);
  const std::string target = dir + "/rs-evt-true";
  std::filesystem::copy_file("/bin/true", target,
                             std::filesystem::copy_options::overwrite_existing);
  Hits hits;
  auto w = EventWatch::Start(
      *ftrace::testing::KernelTracefs(),
      {{"exec_it", "sched/sched_process_exec", "filename ~ \"*/rs-evt-true\""}}, &hits);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->warnings().empty());
  Exec("/bin/true");
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(hits.Await(absl::ZeroDuration()).empty())
      << hits.Await(absl::ZeroDuration())[0].detail;
  Exec(target);
  const std::vector<EventHit> got = hits.Await(absl::Seconds(10));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trigger, "exec_it");
  EXPECT_TRUE(
      absl::StartsWith(got[0].detail, "sched/sched_process_exec (filename ~ \"*/rs-evt-true\"): "))
      << got[0].detail;
  EXPECT_TRUE(absl::StrContains(got[0].detail, "filename=" + target)) << got[0].detail;
  EXPECT_GT(got[0].boottime_ns, 0);
  EXPECT_EQ((*w)->stats().hits, 1u);
  EXPECT_EQ((*w)->stats().watching, 1u);
  const std::string instance = ftrace::testing::InstanceHeldByThisProcess("trigger");
  EXPECT_FALSE(instance.empty());
  w->reset();
  // Its instance goes with it.
  EXPECT_TRUE(instance.empty() || !std::filesystem::exists(instance)) << instance;
  std::filesystem::remove_all(dir);
}

TEST(EventWatchTest, AFilterTheKernelRefusesAndAnUnknownEventAreNamed) {
  RINGSIDE_REQUIRE_TRACEFS();
  Hits hits;
  auto w = EventWatch::Start(*ftrace::testing::KernelTracefs(),
                             {{"bad", "sched/sched_process_exec", "no_such_field > 3"},
                              {"gone", "nosuch/event", ""},
                              {"fine", "sched/sched_process_exit", ""}},
                             &hits);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ((*w)->warnings().size(), 2u);
  EXPECT_TRUE(absl::StartsWith((*w)->warnings()[0],
                               "trigger bad: event sched/sched_process_exec is not watched: bad "
                               "filter 'no_such_field > 3'"))
      << (*w)->warnings()[0];
  EXPECT_EQ((*w)->warnings()[1],
            "trigger gone: event nosuch/event is not watched: this kernel has no event "
            "nosuch/event");
  EXPECT_EQ((*w)->stats().watching, 1u);
  EXPECT_EQ((*w)->stats().failed, 2u);
}

}  // namespace
}  // namespace ringside::agent
