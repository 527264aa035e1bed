#include "agent/snapshots/trigger_policy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/scratch_cgroup.h"

namespace ringside::agent {
namespace {

using Verdict = TriggerPolicy::Verdict;
using Rule = TriggerPolicy::Rule;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

Rule MakeRule(const std::string& name, absl::Duration cooldown, uint32_t max_per_hour = 0,
              uint32_t max_per_24_h = 0, double skip_probability = 0) {
  Rule rule;
  rule.name = name;
  rule.cooldown = cooldown;
  rule.max_per_hour = max_per_hour;
  rule.max_per_24_h = max_per_24_h;
  rule.skip_probability = skip_probability;
  return rule;
}

// A random source that must not be drawn from.
double NoRandom() {
  ADD_FAILURE() << "random drawn for a rule without skip_probability";
  return 0.5;
}

// Returns the given values in turn.
std::function<double()> Sequence(std::vector<double> values) {
  auto next = std::make_shared<size_t>(0);
  return [values, next] {
    if (*next >= values.size()) {
      ADD_FAILURE() << "random drawn more often than expected";
      return 0.999;
    }
    return values[(*next)++];
  };
}

TEST(TriggerPolicyTest, UnknownNameNeverFiresAndIsNotCounted) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  EXPECT_EQ(policy.Offer("crash", kT0), Verdict::kUnknown);
  EXPECT_EQ(policy.Offer("", kT0), Verdict::kUnknown);
  EXPECT_EQ(policy.counts().fired, 0u);
  EXPECT_EQ(policy.counts().suppressed, 0u);
  EXPECT_EQ(policy.Find("crash"), nullptr);
}

TEST(TriggerPolicyTest, FirstRequestOfAKnownTriggerFires) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60), 1, 1)}, NoRandom);
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
}

TEST(TriggerPolicyTest, CooldownHoldsBackUntilExactlyItsEnd) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(60) - absl::Nanoseconds(1)),
            Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(60)), Verdict::kFire);
  // The next cooldown runs from the new fire, not from the first.
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(119)), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(120)), Verdict::kFire);
}

TEST(TriggerPolicyTest, SuppressedRequestsDoNotRestartTheCooldown) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  for (int s = 1; s < 60; s++) {
    ASSERT_EQ(policy.Offer("oom", kT0 + absl::Seconds(s)), Verdict::kCooldown) << s;
  }
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(60)), Verdict::kFire);
}

TEST(TriggerPolicyTest, ZeroCooldownAndNoLimitsFiresEveryRequest) {
  TriggerPolicy policy({MakeRule("manual", absl::ZeroDuration())}, NoRandom);
  for (int i = 0; i < 100; i++) ASSERT_EQ(policy.Offer("manual", kT0), Verdict::kFire) << i;
  EXPECT_EQ(policy.counts("manual").fired, 100u);
}

TEST(TriggerPolicyTest, CooldownIsPerTrigger) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60)), MakeRule("crash", absl::Seconds(60))},
                       NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("crash", kT0 + absl::Seconds(1)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(1)), Verdict::kCooldown);
}

TEST(TriggerPolicyTest, HourLimitSlidesWithTheOldestFireInTheHour) {
  TriggerPolicy policy({MakeRule("oom", absl::ZeroDuration(), /*max_per_hour=*/3)}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  ASSERT_EQ(policy.Offer("oom", kT0 + absl::Minutes(10)), Verdict::kFire);
  ASSERT_EQ(policy.Offer("oom", kT0 + absl::Minutes(20)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(30)), Verdict::kHourLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(60) - absl::Nanoseconds(1)),
            Verdict::kHourLimit);
  // The fire at kT0 leaves the window an hour later.
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(60)), Verdict::kFire);
  // Now 10, 20 and 60 are in the window; 10 leaves at 70.
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(61)), Verdict::kHourLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(70)), Verdict::kFire);
}

TEST(TriggerPolicyTest, DayLimitSlidesWithTheOldestFireInTheDay) {
  TriggerPolicy policy({MakeRule("oom", absl::ZeroDuration(), 0, /*max_per_24_h=*/2)}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  ASSERT_EQ(policy.Offer("oom", kT0 + absl::Hours(1)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(2)), Verdict::kDayLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(24) - absl::Nanoseconds(1)), Verdict::kDayLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(24)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(24) + absl::Minutes(1)), Verdict::kDayLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(25)), Verdict::kFire);
}

TEST(TriggerPolicyTest, HourLimitCountsOnlyTheLastHourWhenADayLimitIsAlsoSet) {
  TriggerPolicy policy({MakeRule("oom", absl::ZeroDuration(), /*max_per_hour=*/1,
                                 /*max_per_24_h=*/3)},
                       NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(59)), Verdict::kHourLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(1)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(2)), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(3)), Verdict::kDayLimit);
}

TEST(TriggerPolicyTest, VerdictNamesTheFirstRuleThatHoldsBack) {
  // Cooldown, then the hour, then the day.
  TriggerPolicy policy({MakeRule("oom", absl::Minutes(10), 1, 1)}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(1)), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(11)), Verdict::kHourLimit);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Minutes(61)), Verdict::kDayLimit);
}

TEST(TriggerPolicyTest, SkipProbabilityComparesTheInjectedRandom) {
  TriggerPolicy policy({MakeRule("oom", absl::ZeroDuration(), 0, 0, 0.25)},
                       Sequence({0.0, 0.2499, 0.25, 0.9}));
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kSkipped);
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kSkipped);
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
}

// As Perfetto: the draw comes before any limit, so a request that would hit
// the cooldown is still reported as skipped when the draw says so.
TEST(TriggerPolicyTest, SkipIsDrawnBeforeTheLimits) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60), 0, 0, 0.5)}, Sequence({0.9, 0.1, 0.9}));
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(1)), Verdict::kSkipped);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(2)), Verdict::kCooldown);
}

TEST(TriggerPolicyTest, SkippedRequestsDoNotStartACooldown) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60), 0, 0, 0.5)}, Sequence({0.1, 0.9}));
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kSkipped);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(1)), Verdict::kFire);
}

TEST(TriggerPolicyTest, ZeroSkipProbabilityNeverDrawsAndOneAlwaysSkips) {
  TriggerPolicy never({MakeRule("a", absl::ZeroDuration())}, NoRandom);
  EXPECT_EQ(never.Offer("a", kT0), Verdict::kFire);
  TriggerPolicy always({MakeRule("a", absl::ZeroDuration(), 0, 0, 1.0)});
  for (int i = 0; i < 1000; i++) ASSERT_EQ(always.Offer("a", kT0), Verdict::kSkipped) << i;
}

TEST(TriggerPolicyTest, DefaultRandomIsInZeroToOneAndNotConstant) {
  const std::function<double()> random = TriggerPolicy::UniformRandom();
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; i++) {
    const double r = random();
    ASSERT_GE(r, 0.0);
    ASSERT_LT(r, 1.0);
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  // 10000 uniform draws all in [0.1, 0.9) would have probability 0.8^10000.
  EXPECT_LT(lo, 0.1);
  EXPECT_GE(hi, 0.9);
}

TEST(TriggerPolicyTest, CountsSplitFiredAndSuppressedPerTriggerAndInTotal) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60)), MakeRule("crash", absl::Seconds(60))},
                       NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  for (int i = 0; i < 49; i++) ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kCooldown);
  ASSERT_EQ(policy.Offer("crash", kT0), Verdict::kFire);
  ASSERT_EQ(policy.Offer("crash", kT0), Verdict::kCooldown);
  ASSERT_EQ(policy.Offer("nope", kT0), Verdict::kUnknown);
  EXPECT_EQ(policy.counts("oom").fired, 1u);
  EXPECT_EQ(policy.counts("oom").suppressed, 49u);
  EXPECT_EQ(policy.counts("crash").fired, 1u);
  EXPECT_EQ(policy.counts("crash").suppressed, 1u);
  EXPECT_EQ(policy.counts("nope").fired + policy.counts("nope").suppressed, 0u);
  EXPECT_EQ(policy.counts().fired, 2u);
  EXPECT_EQ(policy.counts().suppressed, 50u);
}

TEST(TriggerPolicyTest, ReplaceKeepsTheHistoryOfTriggersWhoseNameStays) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60), 0, 1)}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kCooldown);
  policy.Replace({MakeRule("oom", absl::Seconds(60), 0, 1), MakeRule("crash", absl::Seconds(60))});
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(30)), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Hours(1)), Verdict::kDayLimit);
  EXPECT_EQ(policy.Offer("crash", kT0 + absl::Seconds(30)), Verdict::kFire);
  EXPECT_EQ(policy.counts("oom").fired, 1u);
  EXPECT_EQ(policy.counts("oom").suppressed, 3u);
}

TEST(TriggerPolicyTest, ReplaceJudgesKeptHistoryByTheNewSettings) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  policy.Replace({MakeRule("oom", absl::Seconds(10))});
  EXPECT_EQ(policy.Find("oom")->cooldown, absl::Seconds(10));
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(9)), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(10)), Verdict::kFire);
}

TEST(TriggerPolicyTest, ReplaceForgetsTriggersThatAreRemoved) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  policy.Replace({MakeRule("crash", absl::Seconds(60))});
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(1)), Verdict::kUnknown);
  EXPECT_EQ(policy.counts("oom").fired, 0u);
  // Back again, it starts afresh.
  policy.Replace({MakeRule("oom", absl::Seconds(60))});
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(2)), Verdict::kFire);
}

TEST(TriggerPolicyTest, TotalsKeepWhatRemovedTriggersCounted) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kCooldown);
  policy.Replace({});
  EXPECT_EQ(policy.counts().fired, 1u);
  EXPECT_EQ(policy.counts().suppressed, 1u);
}

TEST(TriggerPolicyTest, ClockSteppedBackDoesNotReopenTheCooldown) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(60))}, NoRandom);
  ASSERT_EQ(policy.Offer("oom", kT0), Verdict::kFire);
  EXPECT_EQ(policy.Offer("oom", kT0 - absl::Hours(2)), Verdict::kCooldown);
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(60)), Verdict::kFire);
}

TEST(TriggerPolicyTest, HeldFireTimesStayWithinTheLimitsWindow) {
  TriggerPolicy policy(
      {MakeRule("hour", absl::ZeroDuration(), 3), MakeRule("day", absl::ZeroDuration(), 0, 5),
       MakeRule("free", absl::ZeroDuration())},
      NoRandom);
  // A request a minute for two days.
  for (int m = 0; m < 2 * 24 * 60; m++) {
    const absl::Time now = kT0 + absl::Minutes(m);
    policy.Offer("hour", now);
    policy.Offer("day", now);
    policy.Offer("free", now);
    ASSERT_LE(policy.HeldFireTimesForTesting("hour"), 3u) << m;
    ASSERT_LE(policy.HeldFireTimesForTesting("day"), 5u) << m;
    ASSERT_EQ(policy.HeldFireTimesForTesting("free"), 0u) << m;
  }
  EXPECT_EQ(policy.counts("hour").fired, 2u * 24 * 3);
  EXPECT_EQ(policy.counts("day").fired, 2u * 5);
  EXPECT_EQ(policy.counts("free").fired, 2u * 24 * 60);
}

// The fire times a limit needs are bounded by kMaxTriggerFiresPerWindow; a
// larger limit holds back at the bound rather than letting more through.
TEST(TriggerPolicyTest, LimitsAboveTheBoundActAsTheBound) {
  TriggerPolicy policy({MakeRule("oom", absl::ZeroDuration(), kMaxTriggerFiresPerWindow + 5)},
                       NoRandom);
  EXPECT_EQ(policy.Find("oom")->max_per_hour, kMaxTriggerFiresPerWindow);
  for (uint32_t i = 0; i < kMaxTriggerFiresPerWindow; i++) {
    ASSERT_EQ(policy.Offer("oom", kT0 + absl::Milliseconds(i)), Verdict::kFire) << i;
  }
  EXPECT_EQ(policy.Offer("oom", kT0 + absl::Seconds(20)), Verdict::kHourLimit);
  EXPECT_EQ(policy.HeldFireTimesForTesting("oom"), kMaxTriggerFiresPerWindow);
}

TEST(TriggerPolicyTest, OfDuplicateNamesTheFirstRuleIsUsed) {
  TriggerPolicy policy({MakeRule("oom", absl::Seconds(5)), MakeRule("oom", absl::Seconds(50))},
                       NoRandom);
  ASSERT_NE(policy.Find("oom"), nullptr);
  EXPECT_EQ(policy.Find("oom")->cooldown, absl::Seconds(5));
}

TEST(TriggerPolicyTest, RulesFromConfigApplyTheDefaultCooldownOnlyWhenUnset) {
  config::TraceConfig cfg;
  config::TraceConfig::TriggerConfig* tc = cfg.mutable_trigger_config();
  tc->set_trigger_mode(config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT);
  config::TraceConfig::TriggerConfig::Trigger* a = tc->add_triggers();
  a->set_name("oom");
  a->set_stop_delay_ms(1500);
  a->set_max_per_24_h(10);
  a->set_skip_probability(0.25);
  a->set_max_per_hour(3);
  config::TraceConfig::TriggerConfig::Trigger* b = tc->add_triggers();
  b->set_name("manual");
  b->set_cooldown_ms(0);

  const std::vector<Rule> rules = TriggerPolicy::RulesFrom(cfg);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].name, "oom");
  EXPECT_EQ(rules[0].cooldown, absl::Milliseconds(kDefaultTriggerCooldownMs));
  EXPECT_EQ(rules[0].stop_delay, absl::Milliseconds(1500));
  EXPECT_EQ(rules[0].max_per_hour, 3u);
  EXPECT_EQ(rules[0].max_per_24_h, 10u);
  EXPECT_EQ(rules[0].skip_probability, 0.25);
  EXPECT_EQ(rules[1].name, "manual");
  EXPECT_EQ(rules[1].cooldown, absl::ZeroDuration());
  EXPECT_EQ(rules[1].max_per_hour, 0u);
  EXPECT_TRUE(TriggerPolicy::RulesFrom(config::TraceConfig()).empty());
}

Incident MakeIncident(Incident::Kind kind, int32_t signal = 0, std::string comm = "app") {
  Incident incident;
  incident.kind = kind;
  incident.pid = 4321;
  incident.tgid = 4321;
  incident.signal = signal;
  incident.comm = std::move(comm);
  return incident;
}

TEST(TriggerPolicyTest, RulesFromConfigReadTheIncidentFilterWithTheCrashSignalsByDefault) {
  config::TraceConfig cfg;
  config::TraceConfig::TriggerConfig* tc = cfg.mutable_trigger_config();
  using Kind = config::TraceConfig::TriggerConfig::Trigger::Incident;
  config::TraceConfig::TriggerConfig::Trigger* crash = tc->add_triggers();
  crash->set_name("crash");
  crash->mutable_incident()->add_kinds(Kind::FATAL_SIGNAL);
  crash->mutable_incident()->add_kinds(Kind::CORE_DUMP);
  config::TraceConfig::TriggerConfig::Trigger* oom = tc->add_triggers();
  oom->set_name("oom");
  oom->mutable_incident()->add_kinds(Kind::OOM_KILL);
  oom->mutable_incident()->add_signals(SIGKILL);
  oom->mutable_incident()->add_comms("java");
  oom->mutable_incident()->add_cgroups("/system.slice/app.service");
  oom->mutable_incident()->add_pod_namespaces("payments");
  oom->mutable_incident()->add_pods("db-*");
  config::TraceConfig::TriggerConfig::Trigger* stall = tc->add_triggers();
  stall->set_name("stall");
  stall->mutable_blocked()->set_threshold_ms(1000);
  stall->mutable_blocked()->add_pod_namespaces("shop");
  stall->mutable_blocked()->add_pods("web-*");
  tc->add_triggers()->set_name("manual");

  const std::vector<Rule> rules = TriggerPolicy::RulesFrom(cfg);
  ASSERT_EQ(rules.size(), 4u);
  ASSERT_TRUE(rules[0].incident.has_value());
  EXPECT_EQ(rules[0].incident->kinds,
            (std::vector<Incident::Kind>{Incident::Kind::kFatalSignal, Incident::Kind::kCoreDump}));
  EXPECT_EQ(rules[0].incident->signals,
            (std::vector<int32_t>{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}));
  EXPECT_TRUE(rules[0].incident->comms.empty());
  ASSERT_TRUE(rules[1].incident.has_value());
  EXPECT_EQ(rules[1].incident->signals, std::vector<int32_t>{SIGKILL});
  EXPECT_EQ(rules[1].incident->comms, std::vector<std::string>{"java"});
  EXPECT_EQ(rules[1].incident->cgroups, std::vector<std::string>{"/system.slice/app.service"});
  EXPECT_EQ(rules[1].incident->pod_namespaces, std::vector<std::string>{"payments"});
  EXPECT_EQ(rules[1].incident->pods, std::vector<std::string>{"db-*"});
  EXPECT_TRUE(rules[0].incident->cgroups.empty());
  EXPECT_TRUE(rules[0].incident->pods.empty());
  ASSERT_TRUE(rules[2].incident.has_value());
  EXPECT_EQ(rules[2].incident->pod_namespaces, std::vector<std::string>{"shop"});
  EXPECT_EQ(rules[2].incident->pods, std::vector<std::string>{"web-*"});
  EXPECT_FALSE(rules[3].incident.has_value());
}

TEST(TriggerPolicyTest, AnIncidentMatchesByKindSignalAndComm) {
  Rule::IncidentFilter crash{{Incident::Kind::kFatalSignal}, {SIGSEGV, SIGABRT}, {}, {}};
  EXPECT_TRUE(TriggerPolicy::Matches(crash, MakeIncident(Incident::Kind::kFatalSignal, SIGSEGV)));
  EXPECT_TRUE(TriggerPolicy::Matches(crash, MakeIncident(Incident::Kind::kFatalSignal, SIGABRT)));
  // A kill is not a crash; an OOM kill is another kind.
  EXPECT_FALSE(TriggerPolicy::Matches(crash, MakeIncident(Incident::Kind::kFatalSignal, SIGKILL)));
  EXPECT_FALSE(TriggerPolicy::Matches(crash, MakeIncident(Incident::Kind::kOomKill)));

  // Signals filter only fatal signals: a core dump's signal is not looked at.
  Rule::IncidentFilter dumps{{Incident::Kind::kCoreDump}, {SIGSEGV}, {"java", "python3"}, {}};
  EXPECT_TRUE(
      TriggerPolicy::Matches(dumps, MakeIncident(Incident::Kind::kCoreDump, SIGQUIT, "python3")));
  EXPECT_FALSE(
      TriggerPolicy::Matches(dumps, MakeIncident(Incident::Kind::kCoreDump, SIGSEGV, "bash")));
}

// cgroups are looked up when the incident comes: a path names whatever
// cgroup is there then.
TEST(TriggerPolicyTest, AnIncidentMatchesByTheCgroupsItsTaskIsIn) {
  Rule::IncidentFilter web{{Incident::Kind::kFatalSignal}, {SIGSEGV}, {}, {"/web", "/db"}};
  std::map<std::string, uint64_t> cgroups = {{"/web", 100}, {"/db", 200}, {"/batch", 300}};
  TriggerPolicy::CgroupIdOf lookup = [&](const std::string& path) -> std::optional<uint64_t> {
    const auto it = cgroups.find(path);
    if (it == cgroups.end()) return std::nullopt;
    return it->second;
  };
  Incident in_db = MakeIncident(Incident::Kind::kFatalSignal, SIGSEGV);
  in_db.cgroup_id = 200;
  EXPECT_TRUE(TriggerPolicy::Matches(web, in_db, lookup));
  Incident in_batch = in_db;
  in_batch.cgroup_id = 300;
  EXPECT_FALSE(TriggerPolicy::Matches(web, in_batch, lookup));
  // The kernel did not say (an OOM kill on an old kernel): not in any.
  Incident unknown = in_db;
  unknown.cgroup_id = 0;
  EXPECT_FALSE(TriggerPolicy::Matches(web, unknown, lookup));
  // /db removed and made again: a new id; the old one no longer matches.
  cgroups["/db"] = 201;
  EXPECT_FALSE(TriggerPolicy::Matches(web, in_db, lookup));
  in_db.cgroup_id = 201;
  EXPECT_TRUE(TriggerPolicy::Matches(web, in_db, lookup));
  cgroups.erase("/db");
  EXPECT_FALSE(TriggerPolicy::Matches(web, in_db, lookup));
  // No cgroups in the filter: any, without a lookup.
  Rule::IncidentFilter any{{Incident::Kind::kFatalSignal}, {SIGSEGV}, {}, {}};
  EXPECT_TRUE(TriggerPolicy::Matches(any, in_batch, nullptr));
}

// Kubernetes namespaces and pod names, as shell patterns; a task in no pod
// passes no filter that names pods.
TEST(TriggerPolicyTest, AnIncidentMatchesByThePodItsTaskIsIn) {
  Rule::IncidentFilter payments{{Incident::Kind::kOomKill}, {}, {}, {}};
  payments.pod_namespaces = {"payments", "team-?"};
  payments.pods = {"db-*"};
  std::map<int32_t, PodNames> pods = {{10, {"payments", "db-0", "postgres"}},
                                      {11, {"payments", "web-5", "nginx"}},
                                      {12, {"team-a", "db-x", ""}},
                                      {13, {"shop", "db-0", "postgres"}}};
  int lookups = 0;
  TriggerPolicy::PodOf pod_of = [&](const Incident& i) -> std::optional<PodNames> {
    lookups++;
    const auto it = pods.find(i.pid);
    if (it == pods.end()) return std::nullopt;
    return it->second;
  };
  auto oom_of = [](int32_t pid) {
    Incident i = MakeIncident(Incident::Kind::kOomKill);
    i.pid = pid;
    return i;
  };
  EXPECT_TRUE(TriggerPolicy::Matches(payments, oom_of(10), nullptr, pod_of));
  EXPECT_FALSE(TriggerPolicy::Matches(payments, oom_of(11), nullptr, pod_of));  // Not db-*.
  EXPECT_TRUE(TriggerPolicy::Matches(payments, oom_of(12), nullptr, pod_of));   // team-?.
  EXPECT_FALSE(TriggerPolicy::Matches(payments, oom_of(13), nullptr, pod_of));  // Namespace.
  EXPECT_FALSE(TriggerPolicy::Matches(payments, oom_of(14), nullptr, pod_of));  // No pod.
  // Namespaces alone.
  Rule::IncidentFilter shop{{Incident::Kind::kOomKill}, {}, {}, {}};
  shop.pod_namespaces = {"shop"};
  EXPECT_TRUE(TriggerPolicy::Matches(shop, oom_of(13), nullptr, pod_of));
  EXPECT_FALSE(TriggerPolicy::Matches(shop, oom_of(10), nullptr, pod_of));
  // Rules without pods look nothing up; the rest look the pod up once.
  Rule any = MakeRule("any-oom", absl::ZeroDuration());
  any.incident = Rule::IncidentFilter{{Incident::Kind::kOomKill}, {}, {}, {}};
  Rule by_pod = MakeRule("payments-db", absl::ZeroDuration());
  by_pod.incident = payments;
  Rule by_ns = MakeRule("shop", absl::ZeroDuration());
  by_ns.incident = shop;
  TriggerPolicy policy({any, by_pod, by_ns}, NoRandom);
  lookups = 0;
  std::vector<std::string> names = policy.RulesFor(oom_of(10), nullptr, pod_of);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"any-oom", "payments-db"}));
  EXPECT_EQ(lookups, 1);
  lookups = 0;
  Rule::IncidentFilter other_kind{{Incident::Kind::kFatalSignal}, {SIGSEGV}, {}, {}};
  other_kind.pods = {"*"};
  EXPECT_FALSE(TriggerPolicy::Matches(other_kind, oom_of(10), nullptr, pod_of));
  EXPECT_EQ(lookups, 0) << "the kind decides first";
}

// The pod of a real task: from its cgroup while it lives, from the
// incident's cgroup id once it is gone (an OOM victim), named from the
// kubelet's directories.
TEST(TriggerPolicyTest, AnIncidentsPodIsFoundByItsTaskOrItsCgroup) {
  const std::string uid = "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
  const std::string id =
      absl::StrFormat("%08x", static_cast<uint32_t>(getpid())) + std::string(56, 'e');
  testing::ScratchCgroup cgroup("kubepods-burstable-pod" + absl::StrReplaceAll(uid, {{"-", "_"}}) +
                                ".slice:cri-containerd:" + id);
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  char dir[] = "/tmp/ringside_kubelet_logs_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string logs = dir;
  std::filesystem::create_directories(logs + "/pods/payments_db-0_" + uid + "/postgres");
  std::filesystem::create_directories(logs + "/containers");
  std::filesystem::create_symlink("/var/log/pods/payments_db-0_" + uid + "/postgres/0.log",
                                  logs + "/containers/db-0_payments_postgres-" + id + ".log");
  KubernetesNames names(logs);
  const std::string procs = cgroup.dir() + "/cgroup.procs";
  const pid_t child = fork();
  if (child == 0) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) _exit(127);
    close(fd);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  Incident oom = MakeIncident(Incident::Kind::kOomKill);
  oom.pid = child;
  oom.cgroup_id = cgroup.id();
  const PodNames postgres{"payments", "db-0", "postgres"};
  for (int i = 0; i < 100 && TriggerPolicy::PodOfIncident(oom, &names) != postgres; i++) {
    usleep(10'000);  // Until the child moved itself.
  }
  EXPECT_EQ(TriggerPolicy::PodOfIncident(oom, &names), postgres);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Gone: its cgroup, by id.
  EXPECT_EQ(TriggerPolicy::PodOfIncident(oom, &names), postgres);
  // A task in no pod; a cgroup id the kernel did not give.
  Incident elsewhere = oom;
  elsewhere.pid = getpid();
  elsewhere.cgroup_id = 0;
  EXPECT_EQ(TriggerPolicy::PodOfIncident(elsewhere, &names), std::nullopt);
  oom.pid = 0;
  oom.cgroup_id = 0;
  EXPECT_EQ(TriggerPolicy::PodOfIncident(oom, &names), std::nullopt);
  std::filesystem::remove_all(logs);
}

TEST(TriggerPolicyTest, RulesForNamesEveryRuleWhoseFilterAnIncidentPasses) {
  Rule crash = MakeRule("crash", absl::ZeroDuration());
  crash.incident = Rule::IncidentFilter{{Incident::Kind::kFatalSignal}, {SIGSEGV}, {}, {}};
  Rule java = MakeRule("java-crash", absl::ZeroDuration());
  java.incident = Rule::IncidentFilter{{Incident::Kind::kFatalSignal}, {SIGSEGV}, {"java"}, {}};
  Rule manual = MakeRule("manual", absl::ZeroDuration());
  TriggerPolicy policy({crash, java, manual}, NoRandom);
  std::vector<std::string> names =
      policy.RulesFor(MakeIncident(Incident::Kind::kFatalSignal, SIGSEGV, "java"));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"crash", "java-crash"}));
  EXPECT_EQ(policy.RulesFor(MakeIncident(Incident::Kind::kFatalSignal, SIGSEGV, "bash")),
            std::vector<std::string>{"crash"});
  EXPECT_TRUE(policy.RulesFor(MakeIncident(Incident::Kind::kOomKill)).empty());
}

// `blocked` and `runqueue_delay` are incident filters of their kind, with
// the threshold as the least stall that passes.
TEST(TriggerPolicyTest, StallTriggersPassStallsOfTheirKindFromTheirThresholdOn) {
  config::TraceConfig cfg;
  config::TraceConfig::TriggerConfig* tc = cfg.mutable_trigger_config();
  config::TraceConfig::TriggerConfig::Trigger* stuck = tc->add_triggers();
  stuck->set_name("stuck");
  stuck->mutable_blocked()->set_threshold_ms(2000);
  stuck->mutable_blocked()->add_comms("postgres");
  config::TraceConfig::TriggerConfig::Trigger* starved = tc->add_triggers();
  starved->set_name("starved");
  starved->mutable_runqueue_delay()->set_threshold_ms(50);
  starved->mutable_runqueue_delay()->add_cgroups("/latency.slice");
  const std::vector<Rule> rules = TriggerPolicy::RulesFrom(cfg);
  ASSERT_EQ(rules.size(), 2u);
  ASSERT_TRUE(rules[0].incident.has_value());
  EXPECT_EQ(rules[0].incident->kinds, std::vector<Incident::Kind>{Incident::Kind::kBlocked});
  EXPECT_EQ(rules[0].incident->min_stalled_ns, 2'000'000'000);
  EXPECT_EQ(rules[0].incident->comms, std::vector<std::string>{"postgres"});
  ASSERT_TRUE(rules[1].incident.has_value());
  EXPECT_EQ(rules[1].incident->kinds, std::vector<Incident::Kind>{Incident::Kind::kRunqueueDelay});
  EXPECT_EQ(rules[1].incident->cgroups, std::vector<std::string>{"/latency.slice"});

  Incident blocked = MakeIncident(Incident::Kind::kBlocked, 0, "postgres");
  blocked.stalled_ns = 1'999'999'999;
  EXPECT_FALSE(TriggerPolicy::Matches(*rules[0].incident, blocked));
  blocked.stalled_ns = 2'000'000'000;
  EXPECT_TRUE(TriggerPolicy::Matches(*rules[0].incident, blocked));
  blocked.comm = "bash";
  EXPECT_FALSE(TriggerPolicy::Matches(*rules[0].incident, blocked));
  // A run-queue delay as long is another kind.
  Incident waited = MakeIncident(Incident::Kind::kRunqueueDelay, 0, "postgres");
  waited.stalled_ns = 5'000'000'000;
  EXPECT_FALSE(TriggerPolicy::Matches(*rules[0].incident, waited));
  waited.cgroup_id = 77;
  EXPECT_TRUE(TriggerPolicy::Matches(*rules[1].incident, waited,
                                     [](const std::string&) { return uint64_t{77}; }));
}

TEST(TriggerPolicyTest, VerdictNamesAreTheConfigFieldsThatHoldBack) {
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kFire), "fire");
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kUnknown), "unknown");
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kCooldown), "cooldown");
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kHourLimit), "max_per_hour");
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kDayLimit), "max_per_24_h");
  EXPECT_STREQ(TriggerPolicy::VerdictName(Verdict::kSkipped), "skipped");
}

}  // namespace
}  // namespace ringside::agent
