#include "agent/sources/pressure_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/descriptors/cgroup_fs.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

class Events : public PressureListener {
 public:
  void OnPressure(const PressureEvent& e) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  }
  // Waits until an event came, at most `limit`.
  std::vector<PressureEvent> Await(absl::Duration limit) {
    absl::MutexLock lock(&mu_);
    auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&some), limit);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<PressureEvent> events_ ABSL_GUARDED_BY(mu_);
};

// Waits until `done` or `limit`; returns `done()`.
template <typename F>
bool Eventually(F done, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  return done();
}

std::string Joined(PressureWatch& w) { return absl::StrJoin(w.TakeWarnings(), "\n"); }

TEST(PressureWatchTest, TheTextIsTheKernelsTriggerFormatInMicroseconds) {
  EXPECT_EQ(PressureWatch::TriggerText({"t", "memory", false, 150000, 1000000, {}}),
            "some 150000 1000000");
  EXPECT_EQ(PressureWatch::TriggerText({"t", "io", true, 500000, 2000000, {}}),
            "full 500000 2000000");
}

// Three tasks spinning on a machine of two CPUs (or more than its CPUs):
// one always waits for a CPU, so "some" CPU pressure is near 100%, and the
// kernel says so within a window.
TEST(PressureWatchTest, TheKernelWakesItWhenCpuPressureCrossesTheThreshold) {
  if (access("/proc/pressure/cpu", W_OK) != 0) {
    GTEST_SKIP() << "needs /proc/pressure/cpu, writable (CONFIG_PSI, psi=1; root)";
  }
  Events events;
  // A window of 2 s: the kernel takes it without CAP_SYS_RESOURCE too.
  auto w = PressureWatch::Start({{"cpu_busy", "cpu", false, 100000, 2000000, {}}}, &events, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(Joined(**w), "");
  EXPECT_EQ((*w)->stats().watching, 1u);
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  ringside::testing::ScopedProcesses spinners(
      ringside::testing::StartSpinners(cpus + 1, "rs-spin"));
  const std::vector<PressureEvent> got = events.Await(absl::Seconds(30));
  spinners.Stop();
  ASSERT_FALSE(got.empty()) << "no CPU pressure event with " << cpus + 1 << " spinners";
  EXPECT_EQ(got[0].trigger, "cpu_busy");
  EXPECT_TRUE(
      absl::StartsWith(got[0].detail, "cpu some >= 100 ms in 2000 ms of the machine: avg10 "))
      << got[0].detail;
  EXPECT_GT(got[0].boottime_ns, 0);
  EXPECT_GE((*w)->stats().events, 1u);
}

TEST(PressureWatchTest, AKernelWithoutPsiIsNamed) {
  const std::string dir = ::testing::TempDir() + "/no-psi-proc";
  std::filesystem::create_directories(dir);
  Events events;
  auto w =
      PressureWatch::Start({{"mem", "memory", false, 100000, 1000000, {}}}, &events,
                           {.proc = dir, .cgroup2_mount = "", .retry_period = absl::Seconds(5)});
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string warnings = Joined(**w);
  EXPECT_TRUE(absl::StrContains(warnings,
                                "trigger mem: the machine's memory pressure is not "
                                "watched: " +
                                    dir + "/pressure/memory is missing"))
      << warnings;
  EXPECT_TRUE(absl::StrContains(warnings, "psi=1")) << warnings;
  EXPECT_EQ((*w)->stats().watching, 0u);
  EXPECT_EQ((*w)->stats().waiting, 1u);
  std::filesystem::remove_all(dir);
}

// A cgroup named before it exists is watched once it is made, and again
// after it is removed and made anew.
TEST(PressureWatchTest, ACgroupIsWatchedOnceItIsThereAndAgainAfterItCameBack) {
  testing::ScratchCgroup cg("later", /*make_leaf=*/false);
  if (!cg.ok()) GTEST_SKIP() << cg.error();
  const std::string dir = Cgroup2Mount() + cg.path();
  Events events;
  auto w = PressureWatch::Start(
      {{"io_stall", "io", false, 100000, 2000000, {cg.path()}}}, &events,
      {.proc = "/proc", .cgroup2_mount = Cgroup2Mount(), .retry_period = absl::Milliseconds(50)});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(absl::StrContains(Joined(**w), "trigger io_stall: cgroup " + cg.path() +
                                                 "'s io pressure is not watched: no such cgroup "
                                                 "yet"));
  EXPECT_EQ((*w)->stats().waiting, 1u);
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  EXPECT_TRUE(Eventually([&] { return (*w)->stats().watching == 1; }, absl::Seconds(10)))
      << Joined(**w);
  ASSERT_EQ(rmdir(dir.c_str()), 0) << dir;
  EXPECT_TRUE(Eventually([&] { return (*w)->stats().watching == 0; }, absl::Seconds(10)));
  EXPECT_TRUE(absl::StrContains(Joined(**w), "its cgroup was removed"));
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  EXPECT_TRUE(Eventually([&] { return (*w)->stats().watching == 1; }, absl::Seconds(10)));
  w->reset();
  rmdir(dir.c_str());
}

TEST(PressureWatchTest, AThresholdTheKernelRefusesIsNamedWithTheKernelsReason) {
  if (access("/proc/pressure/memory", W_OK) != 0) {
    GTEST_SKIP() << "needs /proc/pressure/memory, writable (CONFIG_PSI, psi=1; root)";
  }
  Events events;
  // A window past the kernel's 10 s: the config refuses it, the kernel too.
  auto w = PressureWatch::Start({{"mem", "memory", false, 100000, 20000000, {}}}, &events, {});
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string warnings = Joined(**w);
  EXPECT_TRUE(absl::StrContains(warnings,
                                "the kernel refuses 'some 100000 20000000' in "
                                "/proc/pressure/memory: Invalid argument"))
      << warnings;
  EXPECT_EQ((*w)->stats().watching, 0u);
}

}  // namespace
}  // namespace ringside::agent
