#include "agent/snapshots/trigger_tally.h"

#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/config/config_loader.h"
#include "agent/snapshots/snapshot_retention.h"
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

// Names beyond the first kMaxNames unreserved ones (triggers reloads
// removed) are still counted, in one shared row.
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

// The issue-52 attack's shape: however many other names came first, a
// configured trigger (and requests', and SIGUSR1's) keeps a row of its own
// and never counts as "other".
TEST(TriggerTallyTest, ReservedNamesGetARowOfTheirOwnAfterOthersFilledTheTable) {
  TriggerTally tally;
  tally.Reserve({"crash", "request", "signal"});
  for (size_t i = 0; i < TriggerTally::kMaxNames + 6; i++) {
    tally.Count(absl::StrCat("removed-", i), Outcome::kSuppressed);
  }
  tally.Count("crash", Outcome::kFired);
  tally.Count("request", Outcome::kSuppressed);
  tally.Count("signal", Outcome::kFired);
  const std::vector<TriggerTally::Counts> counts = tally.counts();
  // kMaxNames unreserved rows, "other", then the three reserved ones.
  ASSERT_EQ(counts.size(), TriggerTally::kMaxNames + 4);
  EXPECT_EQ(counts[TriggerTally::kMaxNames].name, TriggerTally::kOtherName);
  EXPECT_EQ(counts[TriggerTally::kMaxNames].suppressed, 6u);
  EXPECT_EQ(counts[TriggerTally::kMaxNames].fired, 0u);
  EXPECT_EQ(counts[TriggerTally::kMaxNames + 1].name, "crash");
  EXPECT_EQ(counts[TriggerTally::kMaxNames + 1].fired, 1u);
  EXPECT_EQ(counts[TriggerTally::kMaxNames + 2].name, "request");
  EXPECT_EQ(counts[TriggerTally::kMaxNames + 3].name, "signal");
}

// A reload's new set: a name added gets its row even when the table is
// full; one removed keeps the row it has.
TEST(TriggerTallyTest, ReserveTakesTheReloadedSetAndRowsStay) {
  TriggerTally tally;
  tally.Reserve({"deploy"});
  tally.Count("deploy", Outcome::kFired);
  for (size_t i = 0; i < TriggerTally::kMaxNames; i++) {
    tally.Count(absl::StrCat("old-", i), Outcome::kFired);
  }
  tally.Reserve({"canary"});
  tally.Count("deploy", Outcome::kJoined);
  tally.Count("canary", Outcome::kFired);
  tally.Count("old-new", Outcome::kFired);
  const std::vector<TriggerTally::Counts> counts = tally.counts();
  ASSERT_EQ(counts.size(), TriggerTally::kMaxNames + 3);
  EXPECT_EQ(counts[0].name, "deploy");
  EXPECT_EQ(counts[0].joined, 1u);
  EXPECT_EQ(counts.back().name, TriggerTally::kOtherName);
  EXPECT_EQ(counts[counts.size() - 2].name, "canary");
}

// The config refuses a trigger named as one of the tally's own rows or as a
// requested snapshot's file reason; the two lists are kept in two layers.
TEST(TriggerTallyTest, TheRowsOfItsOwnAreNamesTheConfigRefuses) {
  for (const char* own :
       {TriggerTally::kOtherName, kRequestedSnapshotReason, kSignalSnapshotReason}) {
    EXPECT_TRUE(absl::c_linear_search(kReservedTriggerNames, std::string(own))) << own;
  }
  EXPECT_TRUE(absl::StartsWith(RequestedSnapshotFileReason("deploy"), kReservedTriggerNamePrefix));
}

}  // namespace
}  // namespace ringside::agent
