#include "agent/sources/cpu_budget.h"

#include <time.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// Spins until this thread has used `cpu` of CPU time.
void BurnCpu(absl::Duration cpu) {
  auto thread_cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return absl::DurationFromTimespec(ts);
  };
  const absl::Duration until = thread_cpu() + cpu;
  volatile uint64_t x = 0;
  while (thread_cpu() < until) x = x + 1;
}

class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }
  std::function<absl::Time()> fn() {
    return [this] { return now_; };
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST(CpuBudgetTest, WithinBudgetNoPause) {
  FakeClock clock;
  CpuBudget budget(20, absl::Milliseconds(500), clock.fn());
  // 20 ms of CPU every 100 ms is exactly 20%.
  for (int i = 0; i < 100; ++i) {
    clock.Advance(absl::Milliseconds(100));
    EXPECT_EQ(budget.Charge(absl::Milliseconds(20)), absl::ZeroDuration()) << i;
  }
  EXPECT_EQ(budget.stats().pauses, 0u);
  EXPECT_EQ(budget.stats().cpu_charged, absl::Seconds(2));
}

TEST(CpuBudgetTest, ABurstUpToTheAllowanceIsFree) {
  FakeClock clock;
  CpuBudget budget(20, absl::Milliseconds(500), clock.fn());
  // 20% of 500 ms: 100 ms of CPU at once after a quiet spell.
  EXPECT_EQ(budget.Charge(absl::Milliseconds(100)), absl::ZeroDuration());
  // One more millisecond is over: pause until the bucket drains by it.
  EXPECT_EQ(budget.Charge(absl::Milliseconds(1)), absl::Milliseconds(5));
}

TEST(CpuBudgetTest, PausesBringTheLongRunShareDownToThePercent) {
  FakeClock clock;
  CpuBudget budget(10, absl::Milliseconds(500), clock.fn());
  // A reader that would use a whole CPU: 10 ms of CPU per 10 ms pass,
  // then it pauses as told.
  absl::Duration cpu, wall;
  for (int i = 0; i < 1000; ++i) {
    clock.Advance(absl::Milliseconds(10));
    wall += absl::Milliseconds(10);
    cpu += absl::Milliseconds(10);
    const absl::Duration pause = budget.Charge(absl::Milliseconds(10));
    clock.Advance(pause);
    wall += pause;
  }
  const double share = absl::ToDoubleSeconds(cpu) / absl::ToDoubleSeconds(wall);
  EXPECT_NEAR(share, 0.10, 0.01);
  EXPECT_GT(budget.stats().pauses, 900u);
}

TEST(CpuBudgetTest, ThreadsShareOneBudget) {
  FakeClock clock;
  CpuBudget budget(50, absl::Milliseconds(200), clock.fn());
  // Two readers at 40% each are over 50% together.
  absl::Duration paused;
  for (int i = 0; i < 100; ++i) {
    clock.Advance(absl::Milliseconds(10));
    paused += budget.Charge(absl::Milliseconds(4));
    paused += budget.Charge(absl::Milliseconds(4));
  }
  EXPECT_GT(paused, absl::ZeroDuration());
  EXPECT_GT(budget.stats().pauses, 0u);
}

TEST(CpuBudgetTest, APacerMeasuresItsThreadAndStopsPausingOnStop) {
  CpuBudget budget(1, absl::Milliseconds(10));
  ConsumerPacer pacer(&budget);
  std::atomic<bool> stop{false}, burned{false};
  std::thread reader([&] {
    pacer.AfterPass(stop);  // Starts the meter.
    // 50 ms of CPU: at 1% that asks for a pause of seconds.
    BurnCpu(absl::Milliseconds(50));
    burned = true;
    pacer.AfterPass(stop);
  });
  // Stopped 200 ms into the pause. (A fixed 300 ms from the start left a
  // loaded machine, where 50 ms of CPU take most of that, too little pause.)
  while (!burned.load()) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(200));
  stop = true;
  reader.join();
  EXPECT_GE(pacer.cpu(), absl::Milliseconds(50));
  EXPECT_EQ(pacer.pauses(), 1u);
  // Cut short by stop: well under the seconds the budget asked for.
  EXPECT_GE(pacer.paused(), absl::Milliseconds(100));
  EXPECT_LT(pacer.paused(), absl::Seconds(2));
}

// A snapshot asking for the staging rings to be read does not wait out a
// pause of seconds (it waits 100 ms, then clones without them).
TEST(CpuBudgetTest, APauseIsCutShortWhenAsked) {
  CpuBudget budget(1, absl::Milliseconds(10));
  ConsumerPacer pacer(&budget);
  std::atomic<bool> stop{false}, burned{false}, asked{false};
  std::thread reader([&] {
    pacer.AfterPass(stop);
    BurnCpu(absl::Milliseconds(50));  // At 1%: a pause of seconds.
    burned = true;
    pacer.AfterPass(stop, [&] { return asked.load(); });
  });
  while (!burned.load()) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(50));
  asked = true;
  const absl::Time asked_at = absl::Now();
  reader.join();
  EXPECT_LT(absl::Now() - asked_at, absl::Seconds(1)) << "the pause went on after the request";
  EXPECT_EQ(pacer.pauses(), 1u);
  EXPECT_LT(pacer.paused(), absl::Seconds(2));
}

TEST(CpuBudgetTest, WithoutABudgetAPacerOnlyMeasures) {
  ConsumerPacer pacer(nullptr);
  std::atomic<bool> stop{false};
  pacer.AfterPass(stop);
  BurnCpu(absl::Milliseconds(20));
  pacer.AfterPass(stop);
  EXPECT_GE(pacer.cpu(), absl::Milliseconds(20));
  EXPECT_EQ(pacer.pauses(), 0u);
  EXPECT_EQ(pacer.paused(), absl::ZeroDuration());
}

}  // namespace
}  // namespace ringside::agent
