#include "agent/sources/staging_flush.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// A snapshot's request wakes the reader and ends a CPU budget's pause.
TEST(StagingFlushTest, AnUrgentRequestWakesTheReaderAndIsUrgent) {
  StagingFlush flush;
  flush.Open();
  int wakes = 0;
  const uint64_t n = flush.Request([&] { wakes++; });
  EXPECT_EQ(wakes, 1);
  EXPECT_TRUE(flush.UrgentPending());
  EXPECT_EQ(flush.Pending(), n);
  flush.Served(n);
  EXPECT_FALSE(flush.UrgentPending());
  EXPECT_TRUE(flush.Await(n, absl::Now()));
}

// The buffer owner's request for the durable store waits for the reader's
// own pace: it neither wakes the reader nor cuts a pause short, and is
// served by the next pass like any other.
TEST(StagingFlushTest, ABackgroundRequestIsServedByTheNextPassWithoutUrgency) {
  StagingFlush flush;
  flush.Open();
  const uint64_t n = flush.RequestInBackground();
  ASSERT_NE(n, 0u);
  EXPECT_FALSE(flush.UrgentPending());
  EXPECT_FALSE(flush.IsServed(n));
  const uint64_t pass = flush.Pending();
  EXPECT_EQ(pass, n);
  flush.Served(pass);
  EXPECT_TRUE(flush.IsServed(n));
  // An urgent request after it is urgent until its own pass.
  const uint64_t urgent = flush.Request([] {});
  EXPECT_TRUE(flush.UrgentPending());
  const uint64_t later = flush.RequestInBackground();
  flush.Served(flush.Pending());
  EXPECT_TRUE(flush.IsServed(urgent));
  EXPECT_TRUE(flush.IsServed(later));
  EXPECT_FALSE(flush.UrgentPending());
}

// Not reading (before Open(), after Close()): nothing to wait for.
TEST(StagingFlushTest, ABackgroundRequestOfAClosedFlushIsZero) {
  StagingFlush flush;
  EXPECT_EQ(flush.RequestInBackground(), 0u);
  flush.Open();
  const uint64_t n = flush.RequestInBackground();
  flush.Close();
  EXPECT_EQ(flush.RequestInBackground(), 0u);
  EXPECT_FALSE(flush.IsServed(n)) << "a pass that never ran is not done";
}

}  // namespace
}  // namespace ringside::agent
