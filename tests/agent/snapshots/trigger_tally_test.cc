#include "agent/snapshots/trigger_tally.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Outcome = TriggerTally::Outcome;

TEST(TriggerTallyTest, CountsEachOutcomePerNameInTheOrderNamesCame) {
  TriggerTally tally;
  tally.Count("crash", Outcome::kFired);
  tally.Count("deploy", Outcome::kSuppressed);
  for (int i = 0; i < 49; i++) tally.Count("crash", Outcome::kJoined);
  tally.Count("crash", Outcome::kSuppressed);
  const std::vector<TriggerTally::Counts> counts = tally.counts();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].name, "crash");
  EXPECT_EQ(counts[0].fired, 1u);
  EXPECT_EQ(counts[0].joined, 49u);
  EXPECT_EQ(counts[0].suppressed, 1u);
  EXPECT_EQ(counts[1].name, "deploy");
  EXPECT_EQ(counts[1].fired, 0u);
  EXPECT_EQ(counts[1].suppressed, 1u);
}

// Manual snapshots' reasons are the client's choice: beyond the first
// kMaxNames names, requests are still counted, in one shared row.
TEST(TriggerTallyTest, NamesBeyondTheLimitShareTheOtherRow) {
  TriggerTally tally;
  for (size_t i = 0; i < TriggerTally::kMaxNames + 10; i++) {
    tally.Count(absl::StrCat("reason-", i), Outcome::kFired);
  }
  tally.Count("reason-0", Outcome::kJoined);
  const std::vector<TriggerTally::Counts> counts = tally.counts();
  ASSERT_EQ(counts.size(), TriggerTally::kMaxNames + 1);
  EXPECT_EQ(counts[0].joined, 1u);
  EXPECT_EQ(counts.back().name, TriggerTally::kOtherName);
  EXPECT_EQ(counts.back().fired, 10u);
  uint64_t fired = 0;
  for (const TriggerTally::Counts& c : counts) fired += c.fired;
  EXPECT_EQ(fired, TriggerTally::kMaxNames + 10);
}

}  // namespace
}  // namespace ringside::agent
