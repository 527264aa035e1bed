#include "agent/snapshots/request_limits.h"

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Verdict = TriggerPolicy::Verdict;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TriggerPolicy::Rule OnePerHour() {
  TriggerPolicy::Rule rule;
  rule.name = "request";
  rule.cooldown = absl::Seconds(1);
  rule.max_per_hour = 1;
  return rule;
}

// Issue 52: one member of control_group spent the shared limit and root's
// own snapshot was refused. Root's limit is now its own.
TEST(RequestLimitsTest, AMemberThatSpentTheLimitSpendsNotRoots) {
  RequestLimits limits(OnePerHour());
  EXPECT_EQ(limits.Offer(1000, kT0), Verdict::kFire);
  for (int i = 1; i <= 70; i++) {
    EXPECT_NE(limits.Offer(1000, kT0 + absl::Seconds(i)), Verdict::kFire) << i;
  }
  EXPECT_EQ(limits.Offer(0, kT0 + absl::Seconds(71)), Verdict::kFire);
  EXPECT_EQ(limits.Offer(0, kT0 + absl::Milliseconds(71'500)), Verdict::kCooldown);
  EXPECT_EQ(limits.Offer(0, kT0 + absl::Seconds(73)), Verdict::kHourLimit);
  const TriggerPolicy::Counts counts = limits.counts();
  EXPECT_EQ(counts.fired, 2u);
  EXPECT_EQ(counts.suppressed, 72u);
}

// The configured limit bounds every other uid together: a member with many
// (subordinate) uids cannot multiply what the agent writes.
TEST(RequestLimitsTest, OtherUidsShareTheConfiguredLimit) {
  RequestLimits limits(OnePerHour());
  EXPECT_EQ(limits.Offer(100'000, kT0), Verdict::kFire);
  for (uid_t uid = 100'001; uid < 100'100; uid++) {
    EXPECT_EQ(limits.Offer(uid, kT0 + absl::Seconds(2)), Verdict::kHourLimit) << uid;
  }
  EXPECT_EQ(limits.Offer(0, kT0 + absl::Seconds(3)), Verdict::kFire);
}

// A reload's new limits apply to each uid's history.
TEST(RequestLimitsTest, ReplaceJudgesEachUidsHistoryByTheNewLimits) {
  RequestLimits limits(OnePerHour());
  EXPECT_EQ(limits.Offer(1000, kT0), Verdict::kFire);
  EXPECT_EQ(limits.Offer(1000, kT0 + absl::Seconds(5)), Verdict::kHourLimit);
  TriggerPolicy::Rule two = OnePerHour();
  two.max_per_hour = 2;
  limits.Replace(two);
  EXPECT_EQ(limits.Offer(1000, kT0 + absl::Seconds(6)), Verdict::kFire);
  EXPECT_EQ(limits.Offer(1000, kT0 + absl::Seconds(8)), Verdict::kHourLimit);
}

}  // namespace
}  // namespace ringside::agent
