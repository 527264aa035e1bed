#include "agent/daemon/trigger_dispatcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Fired = TriggerDispatcher::Fired;
using TriggerConfig = config::TraceConfig::TriggerConfig;

// A config with the trigger `name`: `stop_delay_ms`, `cooldown_ms`, and an
// incident filter on OOM kills when `on_oom`.
config::TraceConfig ConfigWithTrigger(const std::string& name, uint32_t stop_delay_ms,
                                      uint32_t cooldown_ms, bool on_oom = false) {
  config::TraceConfig config;
  TriggerConfig::Trigger* t = config.mutable_trigger_config()->add_triggers();
  t->set_name(name);
  t->set_stop_delay_ms(stop_delay_ms);
  t->set_cooldown_ms(cooldown_ms);
  if (on_oom) t->mutable_incident()->add_kinds(TriggerConfig::Trigger::Incident::OOM_KILL);
  return config;
}

Incident IncidentOf(Incident::Kind kind, int64_t boottime_ns) {
  Incident incident;
  incident.kind = kind;
  incident.boottime_ns = boottime_ns;
  incident.pid = 7;
  incident.signal = kind == Incident::Kind::kFatalSignal ? 11 : 0;
  return incident;
}

SnapshotTrigger ByHand(const std::string& name, int32_t uid = 1000) {
  return SnapshotTrigger{name, "ringside trigger", uid, 1};
}

class TriggerDispatcherTest : public ::testing::Test {
 protected:
  TriggerDispatcherTest()
      : null_fd_(open("/dev/null", O_WRONLY | O_CLOEXEC)),
        log_(null_fd_),
        triggers_(&tally_, &log_, [this] { wakes_++; }) {}
  ~TriggerDispatcherTest() override { close(null_fd_); }

  TriggerTally::Counts TallyOf(const std::string& name) const {
    for (const TriggerTally::Counts& c : tally_.counts()) {
      if (c.name == name) return c;
    }
    return {};
  }

  const int null_fd_;
  AgentLog log_;
  TriggerTally tally_;
  int wakes_ = 0;
  TriggerDispatcher triggers_;
};

TEST_F(TriggerDispatcherTest, ANameNotInTheConfigFiresNothing) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 0, 0));
  const Fired fired = triggers_.Fire("crash", ByHand("crash"), "uid 1000 pid 1");
  EXPECT_EQ(fired.kind, Fired::kUnknown);
  absl::Time next;
  EXPECT_TRUE(triggers_.TakeDue(absl::InfiniteFuture(), &next).empty());
  EXPECT_EQ(triggers_.suppressed(), 0u);
  EXPECT_EQ(wakes_, 0);
}

TEST_F(TriggerDispatcherTest, AFireIsDueAfterItsStopDelay) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 60'000, 0));
  const absl::Time before = absl::Now();
  const Fired fired = triggers_.Fire("oom", ByHand("oom"), "uid 1000 pid 1");
  ASSERT_EQ(fired.kind, Fired::kQueued);
  ASSERT_TRUE(fired.due.has_value());
  EXPECT_GE(*fired.due, before + absl::Seconds(60));
  EXPECT_EQ(wakes_, 1);

  absl::Time next;
  EXPECT_TRUE(triggers_.TakeDue(*fired.due - absl::Milliseconds(1), &next).empty());
  EXPECT_EQ(next, *fired.due);
  const std::vector<TriggerDispatcher::Due> due = triggers_.TakeDue(*fired.due, &next);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].trigger.name, "oom");
  EXPECT_EQ(due[0].trigger.producer_name, "ringside trigger");
  EXPECT_TRUE(due[0].joined.empty());
  EXPECT_EQ(next, absl::InfiniteFuture());
}

// Each trigger has at most one snapshot pending: a second fire joins it, is
// listed in it, and counts as suppressed.
TEST_F(TriggerDispatcherTest, AFireWhileOneIsPendingJoinsIt) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 60'000, 0));
  const Fired first = triggers_.Fire("oom", ByHand("oom", 1), "uid 1 pid 1");
  const Fired second = triggers_.Fire("oom", ByHand("oom", 2), "uid 2 pid 2");
  ASSERT_EQ(first.kind, Fired::kQueued);
  EXPECT_EQ(second.kind, Fired::kJoined);
  EXPECT_EQ(second.due, first.due);
  EXPECT_EQ(wakes_, 1);
  EXPECT_EQ(triggers_.suppressed(), 1u);
  EXPECT_EQ(TallyOf("oom").joined, 1u);

  absl::Time next;
  const std::vector<TriggerDispatcher::Due> due = triggers_.TakeDue(absl::InfiniteFuture(), &next);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].trigger.uid, 1);
  ASSERT_EQ(due[0].joined.size(), 1u);
  EXPECT_EQ(due[0].joined[0].uid, 2);
}

TEST_F(TriggerDispatcherTest, TheCooldownSuppressesTheNextFireOnceTheSnapshotIsTaken) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 0, 60'000));
  ASSERT_EQ(triggers_.Fire("oom", ByHand("oom"), "uid 1000 pid 1").kind, Fired::kQueued);
  absl::Time next;
  ASSERT_EQ(triggers_.TakeDue(absl::InfiniteFuture(), &next).size(), 1u);
  const Fired again = triggers_.Fire("oom", ByHand("oom"), "uid 1000 pid 1");
  EXPECT_EQ(again.kind, Fired::kSuppressed);
  EXPECT_EQ(again.verdict, TriggerPolicy::Verdict::kCooldown);
  EXPECT_EQ(triggers_.suppressed(), 1u);
  EXPECT_EQ(TallyOf("oom").suppressed, 1u);
}

TEST_F(TriggerDispatcherTest, AnIncidentFiresTheTriggersWhoseFilterItPasses) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 0, 0, /*on_oom=*/true));
  triggers_.OnIncident(IncidentOf(Incident::Kind::kFatalSignal, 5));
  absl::Time next;
  EXPECT_TRUE(triggers_.TakeDue(absl::InfiniteFuture(), &next).empty());

  triggers_.OnIncident(IncidentOf(Incident::Kind::kOomKill, 42));
  const std::vector<TriggerDispatcher::Due> due = triggers_.TakeDue(absl::InfiniteFuture(), &next);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].trigger.name, "oom");
  EXPECT_EQ(due[0].trigger.producer_name, "linux.bpf");
  EXPECT_EQ(due[0].trigger.boottime_ns, 42);
}

// A stall fires the triggers of its kind whose threshold it reaches, with
// the task and how long in the file.
TEST_F(TriggerDispatcherTest, AStallFiresItsKindsTriggersFromTheirThresholdNamingTheTask) {
  config::TraceConfig config;
  TriggerConfig::Trigger* stuck = config.mutable_trigger_config()->add_triggers();
  stuck->set_name("stuck");
  stuck->set_cooldown_ms(0);
  stuck->mutable_blocked()->set_threshold_ms(1000);
  TriggerConfig::Trigger* long_stuck = config.mutable_trigger_config()->add_triggers();
  long_stuck->set_name("long_stuck");
  long_stuck->mutable_blocked()->set_threshold_ms(5000);
  triggers_.ReplaceTriggers(config);
  Incident blocked = IncidentOf(Incident::Kind::kBlocked, 42);
  blocked.stalled_ns = 1'500'000'000;
  blocked.cpu = 1;
  blocked.still_blocked = true;
  triggers_.OnIncident(blocked);
  Incident waited = IncidentOf(Incident::Kind::kRunqueueDelay, 43);
  waited.stalled_ns = 9'000'000'000;
  triggers_.OnIncident(waited);
  absl::Time next;
  const std::vector<TriggerDispatcher::Due> due = triggers_.TakeDue(absl::InfiniteFuture(), &next);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].trigger.name, "stuck");
  EXPECT_EQ(due[0].trigger.producer_name, "linux.bpf");
  EXPECT_EQ(due[0].trigger.boottime_ns, 42);
  EXPECT_EQ(due[0].trigger.detail, "pid 7 blocked in D for 1.5s and not woken yet (cpu 1)");
}

// The kernel's pressure and event triggers fire by name, with what they saw
// in the file; a trigger a reload removed fires nothing, and neither does a
// fire once the dispatcher is closed.
TEST_F(TriggerDispatcherTest, PressureAndEventsFireTheirTriggerWithWhatTheKernelSaw) {
  config::TraceConfig config = ConfigWithTrigger("stall", 0, 0);
  TriggerConfig::Trigger* e = config.mutable_trigger_config()->add_triggers();
  e->set_name("exec");
  e->mutable_event()->set_event("sched/sched_process_exec");
  triggers_.ReplaceTriggers(config);
  triggers_.OnPressure({"stall", "memory some >= 150 ms in 2000 ms of the machine", 42});
  triggers_.OnEventHit({"exec", "sched/sched_process_exec: sh-1 [000] filename=/bin/true", 43});
  triggers_.OnPressure({"removed", "cpu some", 44});
  absl::Time next;
  const std::vector<TriggerDispatcher::Due> due = triggers_.TakeDue(absl::InfiniteFuture(), &next);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].trigger.name, "stall");
  EXPECT_EQ(due[0].trigger.producer_name, "psi");
  EXPECT_EQ(due[0].trigger.boottime_ns, 42);
  EXPECT_EQ(due[0].trigger.detail, "memory some >= 150 ms in 2000 ms of the machine");
  EXPECT_EQ(due[1].trigger.name, "exec");
  EXPECT_EQ(due[1].trigger.producer_name, "ftrace");
  EXPECT_EQ(due[1].trigger.detail, "sched/sched_process_exec: sh-1 [000] filename=/bin/true");
  EXPECT_EQ(TallyOf("removed").fired, 0u);
  triggers_.Close();
  triggers_.OnPressure({"stall", "memory some", 45});
  EXPECT_TRUE(triggers_.TakeDue(absl::InfiniteFuture(), &next).empty());
}

// At shutdown the pending fires are taken at once, with the aftermath there
// is; an incident read afterwards fires nothing.
TEST_F(TriggerDispatcherTest, CloseMakesThePendingFiresDueAndIgnoresLaterIncidents) {
  triggers_.ReplaceTriggers(ConfigWithTrigger("oom", 3'600'000, 0, /*on_oom=*/true));
  ASSERT_EQ(triggers_.Fire("oom", ByHand("oom"), "uid 1000 pid 1").kind, Fired::kQueued);
  triggers_.Close();
  absl::Time next;
  EXPECT_EQ(triggers_.TakeDue(absl::Now(), &next).size(), 1u);

  triggers_.OnIncident(IncidentOf(Incident::Kind::kOomKill, 42));
  EXPECT_TRUE(triggers_.TakeDue(absl::InfiniteFuture(), &next).empty());
}

TEST(TriggerReplyTest, AFireNamesItsDelayAndWhereTheSnapshotGoes) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const control::Reply queued = TriggerReply(
      "oom", Fired{Fired::kQueued, TriggerPolicy::Verdict::kFire, now + absl::Seconds(2)},
      "/var/lib/ringside", now);
  ASSERT_TRUE(queued.has_trigger()) << queued.error();
  EXPECT_FALSE(queued.trigger().joined());
  EXPECT_EQ(queued.trigger().delay_ms(), 2000u);
  EXPECT_EQ(queued.trigger().output_dir(), "/var/lib/ringside");

  // A fire due already (its delay passed while it waited) says 0.
  const control::Reply joined = TriggerReply(
      "oom", Fired{Fired::kJoined, TriggerPolicy::Verdict::kFire, now - absl::Seconds(1)}, "/d",
      now);
  ASSERT_TRUE(joined.has_trigger());
  EXPECT_TRUE(joined.trigger().joined());
  EXPECT_EQ(joined.trigger().delay_ms(), 0u);
}

TEST(TriggerReplyTest, NothingFiredIsAnErrorSayingWhy) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const control::Reply unknown = TriggerReply(
      "crash", Fired{Fired::kUnknown, TriggerPolicy::Verdict::kUnknown, std::nullopt}, "/d", now);
  EXPECT_FALSE(unknown.has_trigger());
  EXPECT_EQ(unknown.error(), "no trigger named 'crash' in trigger_config");

  const control::Reply suppressed = TriggerReply(
      "oom", Fired{Fired::kSuppressed, TriggerPolicy::Verdict::kCooldown, std::nullopt}, "/d", now);
  EXPECT_FALSE(suppressed.has_trigger());
  EXPECT_TRUE(absl::StartsWith(suppressed.error(), "trigger 'oom' suppressed: "))
      << suppressed.error();
  EXPECT_TRUE(absl::EndsWith(suppressed.error(), "; counted in status")) << suppressed.error();
}

// A config's triggers on incidents, with linux.bpf's incident programs on
// (`bpf_incidents`) or not, and a linux.ftrace source (`ftrace`) or not.
config::TraceConfig IncidentConfig(bool bpf_incidents, bool ftrace) {
  config::TraceConfig config = ConfigWithTrigger("oom", 0, 0, /*on_oom=*/true);
  config.mutable_trigger_config()->add_triggers()->set_name("by-hand");
  config::DataSourceConfig* bpf = config.add_data_sources()->mutable_config();
  bpf->set_name("linux.bpf");
  bpf->mutable_bpf_config()->set_incidents(bpf_incidents);
  if (ftrace) config.add_data_sources()->mutable_config()->set_name("linux.ftrace");
  return config;
}

TracingSession::Report ReportOf(TracingSession::SourceReport::State bpf, bool ftrace) {
  TracingSession::Report report;
  report.sources.emplace_back().name = "linux.bpf";
  report.sources.back().state = bpf;
  if (ftrace) report.sources.emplace_back().name = "linux.ftrace";
  return report;
}

TEST(IncidentTriggerWarningsTest, EachTriggerOnIncidentsIsNamedWithWhyNoneReachesIt) {
  using State = TracingSession::SourceReport::State;
  const std::vector<std::string> off =
      IncidentTriggerWarnings(IncidentConfig(false, false), ReportOf(State::kRunning, false));
  ASSERT_EQ(off.size(), 1u) << "only the trigger with an incident filter";
  EXPECT_TRUE(absl::StartsWith(off[0], "trigger oom: no incident reaches its incident filter"))
      << off[0];
  EXPECT_TRUE(absl::StrContains(off[0], "are off in this config (bpf_config.incidents)")) << off[0];
  EXPECT_TRUE(absl::StrContains(off[0], "this config has no linux.ftrace source")) << off[0];
  EXPECT_TRUE(absl::EndsWith(off[0], "; it answers requests by name only")) << off[0];

  const std::vector<std::string> failed =
      IncidentTriggerWarnings(IncidentConfig(true, true), ReportOf(State::kFailed, true));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(absl::StrContains(failed[0], "are not running")) << failed[0];
  EXPECT_TRUE(absl::StrContains(failed[0], "the linux.ftrace source cannot report them"))
      << failed[0];

  const std::vector<std::string> running =
      IncidentTriggerWarnings(IncidentConfig(true, false), ReportOf(State::kRunning, false));
  ASSERT_EQ(running.size(), 1u);
  EXPECT_TRUE(absl::StrContains(running[0], "cannot run on this kernel")) << running[0];
}

}  // namespace
}  // namespace ringside::agent
