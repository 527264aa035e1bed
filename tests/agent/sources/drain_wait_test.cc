#include "agent/sources/drain_wait.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

constexpr int64_t kMs = 1'000'000;

// A reader starts at its configured period; a quiet machine (a few hundred
// records a second) lets it sleep a second between passes, and a storm
// brings it back to the period at once, not one halving at a time.
TEST(DrainWaitTest, QuietRingsWaitUpToASecondAndABusyPassComesBackAtOnce) {
  int64_t now = 5000 * kMs;
  DrainWait wait(100, now);
  EXPECT_EQ(wait.next_ms(), 100u);
  wait.AfterPass(150, now += 100 * kMs);  // 1,500 records a second.
  EXPECT_EQ(wait.next_ms(), 1000u);
  wait.AfterPass(0, now += 1000 * kMs);
  EXPECT_EQ(wait.next_ms(), 1000u);
  wait.AfterPass(200'000, now += 1000 * kMs);  // A storm: 200,000 a second.
  EXPECT_EQ(wait.next_ms(), 100u);
}

// In between, the wait is the time the last pass's rate takes to fill a
// pass: 8,192 records a second make half a second.
TEST(DrainWaitTest, TheWaitFillsAPassAtTheLastRate) {
  int64_t now = 0;
  DrainWait wait(100, now);
  wait.AfterPass(2 * DrainWait::kRecordsPerPass, now += 1000 * kMs);
  EXPECT_EQ(wait.next_ms(), 500u);
  wait.AfterPass(DrainWait::kRecordsPerPass, now += 300 * kMs);
  EXPECT_EQ(wait.next_ms(), 300u);
  // Two passes within a millisecond count as a millisecond apart.
  wait.AfterPass(5, now);
  EXPECT_EQ(wait.next_ms(), 819u);  // 4096 records * 1 ms / 5.
}

// A period configured longer than the quiet bound is kept as it is: the
// user asked for fewer passes, never for more.
TEST(DrainWaitTest, APeriodLongerThanTheBoundIsKept) {
  int64_t now = 0;
  DrainWait wait(2500, now);
  EXPECT_EQ(wait.next_ms(), 2500u);
  wait.AfterPass(1'000'000, now += 1000 * kMs);
  EXPECT_EQ(wait.next_ms(), 2500u);
  wait.AfterPass(0, now += 2500 * kMs);
  EXPECT_EQ(wait.next_ms(), 2500u);
}

// Other work of the loop that is due sooner (a stall sweep, a refresh)
// cuts the wait short; one due already, or long ago, still waits 1 ms, so
// that the loop never spins.
TEST(DrainWaitTest, AnEarlierDeadlineCutsTheWaitShort) {
  const int64_t now = 7000 * kMs;
  DrainWait wait(100, now);
  wait.AfterPass(0, now);
  EXPECT_EQ(wait.TimeoutMs(now, INT64_MAX), 1000);
  EXPECT_EQ(wait.TimeoutMs(now, now + 250 * kMs), 250);
  EXPECT_EQ(wait.TimeoutMs(now, now), 1);
  EXPECT_EQ(wait.TimeoutMs(now, INT64_MIN), 1);
}

}  // namespace
}  // namespace ringside::agent
