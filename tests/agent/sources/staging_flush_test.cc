#include "agent/sources/staging_flush.h"

#include <cstdint>

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
  const uint64_t n = flush.RequestInBackground(1000);
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
  const uint64_t later = flush.RequestInBackground(1000);
  flush.Served(flush.Pending());
  EXPECT_TRUE(flush.IsServed(urgent));
  EXPECT_TRUE(flush.IsServed(later));
  EXPECT_FALSE(flush.UrgentPending());
}

// A background pass needs what came before its request, a snapshot's
// everything: the BPF reader leaves CPUs whose batches began since alone
// for the first, and sends every batch for the second.
TEST(StagingFlushTest, ABackgroundPassCoversWhatCameBeforeItsNewestRequest) {
  StagingFlush flush;
  flush.Open();
  flush.RequestInBackground(1000);
  const uint64_t newest = flush.RequestInBackground(2000);
  EXPECT_EQ(flush.PendingBefore(), 2000u) << "one pass serves both: it covers the later";
  flush.Served(flush.Pending());
  EXPECT_TRUE(flush.IsServed(newest));
  const uint64_t urgent = flush.Request([] {});
  flush.RequestInBackground(3000);
  EXPECT_EQ(flush.PendingBefore(), UINT64_MAX) << "an urgent request waits: everything";
  flush.Served(flush.Pending());
  EXPECT_TRUE(flush.IsServed(urgent));
  flush.RequestInBackground(4000);
  EXPECT_EQ(flush.PendingBefore(), 4000u) << "the urgent one was served";
}

// Not reading (before Open(), after Close()): nothing to wait for.
TEST(StagingFlushTest, ABackgroundRequestOfAClosedFlushIsZero) {
  StagingFlush flush;
  EXPECT_EQ(flush.RequestInBackground(1000), 0u);
  flush.Open();
  const uint64_t n = flush.RequestInBackground(1000);
  flush.Close();
  EXPECT_EQ(flush.RequestInBackground(1000), 0u);
  EXPECT_FALSE(flush.IsServed(n)) << "a pass that never ran is not done";
}

}  // namespace
}  // namespace ringside::agent
