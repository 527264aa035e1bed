#include "agent/session/tracing_session.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/tracefile/trace_sink.h"
#include "buffer/chunk_abi.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

using State = TracingSession::State;

// A session without kernel sources: buffers, the /proc scan and (with
// `durable`) the descriptor store only; needs no privilege.
config::TraceConfig BuffersOnly(bool durable) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig(durable ? "buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 1024\n"
                          : "buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 0\n",
                  "test.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return *cfg;
}

trace::Trace Parse(const std::string& bytes) {
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(bytes));
  return t;
}

// Names of the packets' payloads, in order, for the checks of file layout.
std::vector<std::string> Kinds(const trace::Trace& t) {
  std::vector<std::string> out;
  for (const trace::TracePacket& p : t.packet()) {
    const google::protobuf::Reflection* r = p.GetReflection();
    std::vector<const google::protobuf::FieldDescriptor*> fields;
    r->ListFields(p, &fields);
    for (const auto* f : fields) {
      if (f->message_type() != nullptr) out.push_back(f->name());
    }
  }
  return out;
}

SnapshotTrigger ManualTrigger() {
  return SnapshotTrigger{"manual", "ringside snapshot", static_cast<int32_t>(geteuid()),
                         BoottimeNowNs()};
}

TEST(TracingSessionTest, MovesThroughItsStatesInOrderOnly) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(false));
  ASSERT_TRUE(s.ok()) << s.status();
  TracingSession& session = **s;
  EXPECT_EQ(session.state(), State::kConfigured);
  StringSink sink;
  EXPECT_EQ(session.ReadBuffers(&sink).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.CloneSnapshot(ManualTrigger()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(session.Start().ok());
  EXPECT_EQ(session.state(), State::kStarted);
  EXPECT_EQ(session.Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.WriteTrace(&sink).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(sink.data().empty());
  ASSERT_TRUE(session.Stop().ok());
  EXPECT_EQ(session.state(), State::kStopped);
  EXPECT_TRUE(session.Stop().ok());  // Idempotent.
  absl::StatusOr<TracingSession::Summary> summary = session.WriteTrace(&sink);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(sink.finished());
  EXPECT_EQ(summary->file_bytes, sink.data().size());
}

// Clock snapshots go into the ring every snapshot_interval_ms, so that a
// snapshot of any window of it ties BOOTTIME to REALTIME (files of several
// machines are lined up on it); a snapshot holds them with its own, and
// every packet carries the machine's id.
TEST(TracingSessionTest, ClockSnapshotsGoIntoTheRingEveryInterval) {
  config::TraceConfig cfg = BuffersOnly(true);
  cfg.mutable_builtin_data_sources()->set_snapshot_interval_ms(100);
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  // Up to 10 s for three intervals, on a loaded machine.
  int in_ring = 0;
  std::string snapshot;
  for (int tries = 0; tries < 100 && in_ring < 3; tries++) {
    absl::SleepFor(absl::Milliseconds(100));
    absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = (*s)->CloneSnapshot(ManualTrigger());
    ASSERT_TRUE(snap.ok()) << snap.status();
    StringSink sink;
    ASSERT_TRUE((*snap)->WriteTo(&sink).ok());
    snapshot = sink.data();
    in_ring = 0;
    const trace::Trace t = Parse(snapshot);
    for (const trace::TracePacket& p : t.packet()) {
      if (!p.has_clock_snapshot() || p.trusted_packet_sequence_id() == kServiceSequenceId) continue;
      in_ring++;
      std::set<uint32_t> clocks;
      for (const auto& c : p.clock_snapshot().clocks()) clocks.insert(c.clock_id());
      EXPECT_EQ(clocks, (std::set<uint32_t>{1, 3, 6}));  // REALTIME, MONOTONIC, BOOTTIME.
      EXPECT_GT(p.timestamp(), 0u);
    }
  }
  EXPECT_GE(in_ring, 3);
  uint32_t machine_id = 0;
  const trace::Trace t = Parse(snapshot);
  for (const trace::TracePacket& p : t.packet()) {
    if (machine_id == 0) machine_id = p.machine_id();
    EXPECT_EQ(p.machine_id(), machine_id);
  }
  EXPECT_NE(machine_id, 0u);
  ASSERT_TRUE((*s)->Stop().ok());
}

TEST(TracingSessionTest, NoClockSnapshotsInTheRingWhenDisabled) {
  config::TraceConfig cfg = BuffersOnly(false);
  cfg.mutable_builtin_data_sources()->set_snapshot_interval_ms(100);
  cfg.mutable_builtin_data_sources()->set_disable_clock_snapshotting(true);
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  absl::SleepFor(absl::Milliseconds(350));
  ASSERT_TRUE((*s)->Stop().ok());
  StringSink sink;
  ASSERT_TRUE((*s)->WriteTrace(&sink).ok());
  int clocks = 0;
  const trace::Trace t = Parse(sink.data());
  for (const trace::TracePacket& p : t.packet()) clocks += p.has_clock_snapshot();
  EXPECT_EQ(clocks, 2);  // The file's start and end.
}

TEST(TracingSessionTest, AWholeFileHasThePreambleThenTheDataThenTheTrailer) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(false));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  ASSERT_TRUE((*s)->Stop().ok());
  StringSink sink;
  absl::StatusOr<TracingSession::Summary> summary = (*s)->WriteTrace(&sink);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const trace::Trace t = Parse(sink.data());
  EXPECT_EQ(summary->packets, static_cast<uint64_t>(t.packet_size()));
  const std::vector<std::string> kinds = Kinds(t);
  const std::vector<std::string> expected = {
      "trace_uuid",    "system_info",  "clock_snapshot", "trace_config", "process_tree",
      "service_event", "process_tree", "clock_snapshot", "trace_stats",  "service_event"};
  EXPECT_EQ(kinds, expected);
  EXPECT_TRUE(t.packet(5).service_event().tracing_started());
  EXPECT_TRUE(t.packet(9).service_event().tracing_disabled());
  for (const trace::TracePacket& p : t.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), kServiceSequenceId);
  }
}

TEST(TracingSessionTest, TheEmbeddedConfigStatesEveryDefaultInEffect) {
  config::TraceConfig cfg;
  cfg.add_buffers()->set_size_kb(1024);
  cfg.set_write_into_file(true);
  cfg.add_data_sources()->mutable_config()->set_name("linux.ftrace");  // No events: not built.
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  StringSink stream;
  ASSERT_TRUE((*s)->Start(&stream).ok());
  const trace::Trace t = Parse(stream.data());
  const config::TraceConfig* embedded = nullptr;
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_trace_config()) embedded = &p.trace_config();
  }
  ASSERT_NE(embedded, nullptr);
  EXPECT_EQ(embedded->flush_period_ms(), kDefaultFlushPeriodMs);
  EXPECT_EQ(embedded->file_write_period_ms(), kDefaultFileWritePeriodMs);
  const config::FtraceConfig& f = embedded->data_sources(0).config().ftrace_config();
  EXPECT_EQ(embedded->staging_budget_kb(), kDefaultStagingBudgetKb);
  EXPECT_EQ(f.buffer_size_kb(), StagingSharesFor(kDefaultStagingBudgetKb, PossibleCpus(),
                                                 FtraceShare::kAlone, buffer::kMinChunkSize)
                                    .ftrace_buffer_kb);
  EXPECT_EQ(f.drain_period_ms(), kDefaultFtraceDrainPeriodMs);
  EXPECT_EQ(f.drain_buffer_percent(), kDefaultFtraceDrainBufferPercent);
  EXPECT_TRUE(f.compact_sched().enabled());
  ASSERT_TRUE((*s)->Stop().ok());
  ASSERT_TRUE((*s)->WriteTrace(&stream).ok());
}

TEST(TracingSessionTest, AStreamGetsThePreambleAtStartAndOnlyTheTrailerAtTheEnd) {
  config::TraceConfig cfg = BuffersOnly(true);
  cfg.set_write_into_file(true);
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->Start(nullptr).code(), absl::StatusCode::kInvalidArgument);
  StringSink stream;
  ASSERT_TRUE((*s)->Start(&stream).ok());
  // Right away: preamble, then every descriptor of the /proc scan.
  const trace::Trace at_start = Parse(stream.data());
  ASSERT_GT(at_start.packet_size(), 6);
  EXPECT_TRUE(at_start.packet(0).has_trace_uuid());
  size_t descriptors = 0;
  for (const trace::TracePacket& p : at_start.packet()) {
    if (p.trusted_packet_sequence_id() == kDescriptorSequenceId) descriptors++;
  }
  EXPECT_GT(descriptors, 1u);  // At least this process and pid 1.
  const size_t start_bytes = stream.data().size();
  ASSERT_TRUE((*s)->Stop().ok());
  absl::StatusOr<TracingSession::Summary> summary = (*s)->WriteTrace(&stream);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const trace::Trace whole = Parse(stream.data());
  int uuids = 0, stats = 0;
  for (const trace::TracePacket& p : whole.packet()) {
    uuids += p.has_trace_uuid();
    stats += p.has_trace_stats();
  }
  EXPECT_EQ(uuids, 1);  // No second preamble.
  EXPECT_EQ(stats, 1);
  EXPECT_GT(stream.data().size(), start_bytes);
  EXPECT_TRUE(whole.packet(whole.packet_size() - 1).service_event().tracing_disabled());
}

// A sink that refuses every write while `full` is set, as a full disk does.
class FullDiskSink : public TraceSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    if (full.load()) return absl::ResourceExhaustedError("writing out.pftrace: no space left");
    absl::MutexLock lock(&mu_);
    bytes_ += packets.size();
    return absl::OkStatus();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  const std::string& display_name() const override { return name_; }
  uint64_t bytes_written() const override {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }
  std::atomic<bool> full{false};

 private:
  const std::string name_ = "out.pftrace";
  mutable absl::Mutex mu_;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Whoever waits on the session (`ringside record`'s and the agent's main
// threads) sleeps until the attention hook wakes it: a write that fails,
// and the write that works again, each call it once, with the notice to
// take.
TEST(TracingSessionTest, EachNoticeCallsTheAttentionHookOnce) {
  config::TraceConfig cfg = BuffersOnly(true);
  cfg.set_write_into_file(true);
  cfg.set_file_write_period_ms(50);
  // Packets in the ring every 50 ms, for the stream to write.
  cfg.mutable_builtin_data_sources()->set_snapshot_interval_ms(50);
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  std::atomic<int> calls{0};
  (*s)->SetAttentionHook([&calls] { calls++; });
  FullDiskSink sink;
  ASSERT_TRUE((*s)->Start(&sink).ok());
  EXPECT_EQ(calls.load(), 0);
  sink.full = true;
  // Up to 10 s on a loaded machine for the first failed write.
  for (int tries = 0; tries < 200 && calls.load() == 0; tries++) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(calls.load(), 1);
  std::vector<std::string> notices = (*s)->TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(absl::StrContains(notices[0], "no space left")) << notices[0];
  // The writes that keep failing say nothing more.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(calls.load(), 1);
  sink.full = false;
  for (int tries = 0; tries < 200 && calls.load() == 1; tries++) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(calls.load(), 2);
  notices = (*s)->TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(absl::StrContains(notices[0], "again")) << notices[0];
  ASSERT_TRUE((*s)->Stop().ok());
}

TEST(TracingSessionTest, WhatTheWriterAddsJoinsTheSnapshotsOneTraceStatsPacket) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(true));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = (*s)->CloneSnapshot(ManualTrigger());
  ASSERT_TRUE(snap.ok()) << snap.status();
  trace::TraceStats extra;
  trace::TraceStats::TriggerCount* count = extra.add_ringside_triggers();
  count->set_name("crash");
  count->set_joined(49);
  (*snap)->MergeIntoStats(extra);
  StringSink file;
  ASSERT_TRUE((*snap)->WriteTo(&file).ok());
  ASSERT_TRUE((*s)->Stop().ok());
  int stats_packets = 0;
  const trace::Trace t = Parse(file.data());
  for (const trace::TracePacket& p : t.packet()) {
    if (!p.has_trace_stats()) continue;
    stats_packets++;
    // The session's own figures and the writer's, side by side.
    EXPECT_GT(p.trace_stats().buffer_stats_size(), 0);
    ASSERT_EQ(p.trace_stats().ringside_triggers_size(), 1);
    EXPECT_EQ(p.trace_stats().ringside_triggers(0).name(), "crash");
    EXPECT_EQ(p.trace_stats().ringside_triggers(0).joined(), 49u);
  }
  EXPECT_EQ(stats_packets, 1);
}

TEST(TracingSessionTest, ASnapshotIsACompleteTraceAndTheSessionRecordsOn) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(true));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = (*s)->CloneSnapshot(ManualTrigger());
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ((*s)->state(), State::kStarted);
  StringSink file;
  ASSERT_TRUE((*snap)->WriteTo(&file).ok());
  EXPECT_TRUE(file.finished());
  const trace::Trace t = Parse(file.data());
  std::set<int32_t> pids;
  bool stats = false;
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& proc : p.process_tree().processes()) pids.insert(proc.pid());
    stats |= p.has_trace_stats();
  }
  // The durable store's descriptors, cloned: this process is named.
  EXPECT_TRUE(pids.count(getpid())) << "pids: " << pids.size();
  EXPECT_TRUE(stats);
  EXPECT_TRUE(t.packet(0).has_trace_uuid());
  // The clone read nothing of the session's: its own file still gets all
  // the descriptors.
  ASSERT_TRUE((*s)->Stop().ok());
  StringSink whole;
  ASSERT_TRUE((*s)->WriteTrace(&whole).ok());
  std::set<int32_t> whole_pids;
  const trace::Trace whole_trace = Parse(whole.data());
  for (const trace::TracePacket& p : whole_trace.packet()) {
    if (p.trusted_packet_sequence_id() != kDescriptorSequenceId) continue;
    for (const auto& proc : p.process_tree().processes()) whole_pids.insert(proc.pid());
  }
  EXPECT_TRUE(whole_pids.count(getpid()));
}

std::unique_ptr<SessionSnapshot> Snapshot(TracingSession* session, const SnapshotTrigger& trigger) {
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = session->CloneSnapshot(trigger);
  EXPECT_TRUE(snap.ok()) << snap.status();
  return snap.ok() ? std::move(*snap) : nullptr;
}

trace::Trace WriteSnapshot(SessionSnapshot* snap) {
  StringSink file;
  EXPECT_TRUE(snap->WriteTo(&file).ok());
  return Parse(file.data());
}

std::vector<const trace::TracePacket*> TriggerPackets(const trace::Trace& t) {
  std::vector<const trace::TracePacket*> out;
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_clone_snapshot_trigger()) out.push_back(&p);
  }
  return out;
}

TEST(TracingSessionTest, ASnapshotCarriesItsTriggerOnceAtTheTriggersTimeBeforeTheData) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(true));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  const int64_t fired_at = BoottimeNowNs() - 2'000'000;  // Before the clone: a stop delay.
  std::unique_ptr<SessionSnapshot> snap =
      Snapshot(s->get(), SnapshotTrigger{"oom_kill", "bpf.incidents", 1234, fired_at});
  ASSERT_NE(snap, nullptr);
  const trace::Trace t = WriteSnapshot(snap.get());

  const std::vector<const trace::TracePacket*> triggers = TriggerPackets(t);
  ASSERT_EQ(triggers.size(), 1u);
  const trace::TracePacket& p = *triggers[0];
  EXPECT_EQ(p.clone_snapshot_trigger().trigger_name(), "oom_kill");
  EXPECT_EQ(p.clone_snapshot_trigger().producer_name(), "bpf.incidents");
  EXPECT_EQ(p.clone_snapshot_trigger().trusted_producer_uid(), 1234);
  EXPECT_EQ(p.timestamp(), static_cast<uint64_t>(fired_at));
  EXPECT_FALSE(p.has_timestamp_clock_id());  // BOOTTIME, the trace's clock.
  EXPECT_EQ(p.trusted_packet_sequence_id(), kServiceSequenceId);

  // The preamble, then the trigger, then the data (the durable
  // descriptors first), then trace_stats.
  const std::vector<std::string> kinds = Kinds(t);
  const std::vector<std::string> preamble = {"trace_uuid",     "system_info",
                                             "clock_snapshot", "trace_config",
                                             "service_event",  "clone_snapshot_trigger"};
  ASSERT_GT(kinds.size(), preamble.size() + 1);
  EXPECT_EQ(std::vector<std::string>(kinds.begin(), kinds.begin() + 6), preamble);
  EXPECT_EQ(t.packet(6).trusted_packet_sequence_id(), kDescriptorSequenceId);
  EXPECT_EQ(kinds.back(), "trace_stats");
}

TEST(TracingSessionTest, EachOfTwoSnapshotsInARowCarriesOnlyItsOwnTrigger) {
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(BuffersOnly(true));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  std::unique_ptr<SessionSnapshot> first =
      Snapshot(s->get(), SnapshotTrigger{"first", "test", 0, BoottimeNowNs()});
  std::unique_ptr<SessionSnapshot> second =
      Snapshot(s->get(), SnapshotTrigger{"second", "test", 0, BoottimeNowNs()});
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  for (auto [snap, name] : {std::pair{first.get(), "first"}, std::pair{second.get(), "second"}}) {
    const trace::Trace t = WriteSnapshot(snap);
    const std::vector<const trace::TracePacket*> triggers = TriggerPackets(t);
    ASSERT_EQ(triggers.size(), 1u) << name;
    EXPECT_EQ(triggers[0]->clone_snapshot_trigger().trigger_name(), name);
  }
}

// Whether a snapshot taken right after `child` exec'd /bin/true holds that
// exec, from a session of `config` whose readers would not have drained
// their staging rings for seconds.
void ExpectSnapshotHoldsAnExecOfJustBefore(const std::string& config) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(config, "test.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(*cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  ASSERT_TRUE((*s)->warnings().empty()) << (*s)->warnings()[0];
  usleep(50'000);  // The readers are in their long wait.

  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/true", "/bin/true", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::unique_ptr<SessionSnapshot> snap = Snapshot(s->get(), ManualTrigger());
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->sources_not_flushed(), 0);
  const trace::Trace t = WriteSnapshot(snap.get());
  ASSERT_TRUE((*s)->Stop().ok());

  int execs = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      execs += e.has_sched_process_exec() && e.sched_process_exec().pid() == child;
    }
  }
  EXPECT_EQ(execs, 1) << "the exec of pid " << child << " is not in the snapshot";
}

TEST(TracingSessionTest, ASnapshotHoldsWhatTheBpfRingsHadNotHandedOverYet) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  // Process events only: too few to fill a quarter of a ring and wake the
  // reader before its 5 s period.
  ExpectSnapshotHoldsAnExecOfJustBefore(
      "buffers { size_kb: 4096 }\ndurable_buffer_size_kb: 1024\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
      "  sched: false process: true incidents: false drain_period_ms: 5000 } } }\n");
}

TEST(TracingSessionTest, ASnapshotHoldsWhatTheFtraceBuffersHadNotHandedOverYet) {
  RINGSIDE_REQUIRE_TRACEFS();
  ExpectSnapshotHoldsAnExecOfJustBefore(
      "buffers { size_kb: 4096 }\n"
      "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
      "  ftrace_events: \"sched/sched_process_exec\" drain_period_ms: 5000 } } }\n");
}

// A session on `config_text`, started, with no warnings; null (and a
// failure naming why) if it is not.
std::unique_ptr<TracingSession> StartedSession(const std::string& config_text) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(config_text, "test.pbtxt");
  if (!cfg.ok()) {
    ADD_FAILURE() << cfg.status();
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(*cfg);
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return nullptr;
  }
  if (absl::Status st = (*s)->Start(); !st.ok()) {
    ADD_FAILURE() << st;
    return nullptr;
  }
  if (!(*s)->warnings().empty()) {
    ADD_FAILURE() << (*s)->warnings()[0];
    return nullptr;
  }
  return *std::move(s);
}

// A task whose fork and exec the tracker never read (here: the process
// group is off; in a fleet, its fork still unread in another CPU's ring at
// the clone, or a task moved into the cgroup the recording is filtered to)
// is described from its own scheduling records, before they reach the ring:
// a snapshot names every pid it holds. Before, the child below was in the
// snapshot's switches with no descriptor.
TEST(TracingSessionTest, ATaskKnownOnlyFromItsSwitchesIsNamedInASnapshot) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  std::unique_ptr<TracingSession> s = StartedSession(
      "buffers { size_kb: 16384 }\ndurable_buffer_size_kb: 1024\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
      "  sched: true process: false incidents: false } } }\n");
  ASSERT_NE(s, nullptr);
  // Born after the start's /proc scan; sleeps a few times, so it switches,
  // and lives on past the snapshot (a dead task's last switch would name
  // it: OnFinalSwitch).
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, "rs-seen-only", 0, 0, 0);
    for (int i = 0; i < 20; i++) usleep(1000);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  usleep(100'000);
  std::unique_ptr<SessionSnapshot> snap = Snapshot(s.get(), ManualTrigger());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_NE(snap, nullptr);
  const trace::Trace t = WriteSnapshot(snap.get());
  ASSERT_TRUE(s->Stop().ok());

  int switches_in = 0;
  std::string thread_name;
  bool process_named = false;
  for (const trace::TracePacket& p : t.packet()) {
    for (int32_t pid : p.ftrace_events().compact_sched().switch_next_pid()) {
      switches_in += pid == child;
    }
    for (const auto& th : p.process_tree().threads()) {
      if (th.tid() == child) thread_name = th.name();
    }
    for (const auto& pr : p.process_tree().processes()) process_named |= pr.pid() == child;
  }
  ASSERT_GT(switches_in, 0) << "the child " << child << " never switched in";
  // Named by its first switch: its new name, or ours if it switched before
  // its prctl (no rename is recorded with the process group off).
  EXPECT_TRUE(thread_name == "rs-seen-only" || thread_name == "agent_test")
      << "the child " << child << " has no thread descriptor (name \"" << thread_name << "\")";
  EXPECT_TRUE(process_named) << "the child " << child << " has no process descriptor";
}

// A reader hands its chunk pool (1 MiB) far more than the owner thread's
// once-a-second period lets through: a pipe storm's rings, read out in bursts of
// up to a quarter of a 16 MiB ring. Its pool asks the owner to commit when
// half full, and the reader waits for chunks rather than drop: the file
// holds every event the reader took from the rings.
// A sink that keeps the size of the largest piece it was handed.
class PieceSizeSink : public StringSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    largest_ = std::max(largest_, packets.size());
    return StringSink::Write(packets);
  }
  size_t largest() const { return largest_; }

 private:
  size_t largest_ = 0;
};

TEST(TracingSessionTest, AReadersBurstsLargerThanItsChunkPoolAreKeptWhole) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  std::unique_ptr<TracingSession> s = StartedSession(
      "buffers { size_kb: 131072 }\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
      "  sched: true process: false incidents: false ring_size_kb: 16384\n"
      "  drain_period_ms: 5000 } } }\n");
  ASSERT_NE(s, nullptr);
  // The storm runs a second, and on until the readers have moved 2 MiB
  // into the buffer, twice the pool (up to 20 s: a loaded machine's storm
  // is slower; a fixed second once wrote only 1.6 MiB beside a flake check
  // and four VMs). One pair, a CPU's worth: the owner thread must be able
  // to run, which is what the pool's 100 ms wait is sized for
  // (docs/losses.md). Two pairs kept both CPUs busy, and once under ASan
  // 191 chunks were dropped, most likely by that wait giving up (the run
  // did not say; a failure now does).
  const std::vector<pid_t> storm = testing::StartPipeStorm(1);
  const absl::Time start = absl::Now();
  while (absl::Now() - start < absl::Seconds(1) ||
         (s->progress().bytes_written <= (size_t{2} << 20) &&
          absl::Now() - start < absl::Seconds(20))) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  testing::StopProcesses(storm);
  ASSERT_TRUE(s->Stop().ok());
  PieceSizeSink sink;
  absl::StatusOr<TracingSession::Summary> summary = s->WriteTrace(&sink);
  ASSERT_TRUE(summary.ok()) << summary.status();
  // The file went out as it was read, in batches of about a MiB (whole
  // packets), never whole in memory.
  EXPECT_LT(sink.largest(), size_t{3} << 19) << "of " << sink.data().size() << " bytes";
  // The precondition: the storm wrote well over the 1 MiB pool, in a few
  // bursts (the rings are read when a quarter full, at the 5 s drain
  // period if the storm outlasts it, and at the stop).
  EXPECT_GT(sink.data().size(), size_t{2} << 20)
      << "the storm wrote too little to fill the pool in "
      << absl::FormatDuration(absl::Now() - start);
  EXPECT_EQ(summary->events_lost, 0u) << "the rings lost events: make them larger";
  // The pool's own account, for a failure: its waits, and how long.
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(sink.data()));
  std::string pool;
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& ps : p.trace_stats().ringside_producer_stats()) {
      absl::StrAppend(&pool, " ", ps.data_source(), ": ", ps.stalls(), " waits for ",
                      ps.stalled_ns() / 1000000, " ms, ", ps.stall_timeouts(), " given up;");
    }
  }
  EXPECT_EQ(summary->chunks_dropped, 0u) << pool;
  EXPECT_EQ(summary->events_lost_in_pool, 0u);
  EXPECT_EQ(summary->events_lost_in_buffers, 0u);
  EXPECT_EQ(summary->events_kept, summary->events_seen);
}

TEST(TracingSessionTest, ItsReportNamesEachSourceBufferAndTheDurableStore) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 2048 }\ndurable_buffer_size_kb: 1024\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config { sched: true } } }\n",
      "test.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(*cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Start().ok());
  // Some switches of our own, and time for the owner's move into the
  // buffers (once a second when nobody asks sooner).
  for (int i = 0; i < 250; i++) usleep(1000);
  TracingSession::Report r = (*s)->report();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((!r.durable.has_value() || r.durable->entries == 0) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    r = (*s)->report();
  }
  ASSERT_EQ(r.sources.size(), 1u);
  EXPECT_EQ(r.sources[0].name, "linux.bpf");
  EXPECT_EQ(r.sources[0].state, TracingSession::SourceReport::State::kRunning);
  ASSERT_EQ(r.buffers.size(), 1u);
  EXPECT_EQ(r.buffers[0].stats.buffer_size, 2048u * 1024);
  ASSERT_TRUE(r.durable.has_value());
  EXPECT_GT(r.durable->entries, 0u);  // The /proc scan, at least.
  ASSERT_TRUE((*s)->Stop().ok());
  r = (*s)->report();
  ASSERT_EQ(r.sources.size(), 1u);
  EXPECT_EQ(r.sources[0].state, TracingSession::SourceReport::State::kStopped);
  EXPECT_GT(r.sources[0].events, 50u);
  EXPECT_GT(r.buffers[0].stats.bytes_written, 0u);
}

}  // namespace
}  // namespace ringside::agent
