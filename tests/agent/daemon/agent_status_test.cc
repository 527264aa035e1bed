#include "agent/daemon/agent_status.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/config/config_loader.h"
#include "agent/metrics/prometheus_text.h"
#include "agent/tracefile/trace_sink.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/prometheus_tools.h"

namespace ringside::agent {
namespace {

using SourceReport = TracingSession::SourceReport;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

DataSource::StackReport BpfStacks() {
  DataSource::StackReport st;
  st.recorded = true;
  st.blocked_samples = 500;
  st.cpu_samples = 70;
  st.frames_named = 90;
  st.frames_unnamed = 4;
  st.maps_reads = 9;
  st.maps_unreadable = 3;
  st.callstacks = 31;
  st.interned_bytes = 30000;
  st.generations = 2;
  st.remembered_stacks = 35;
  st.symbol_bytes = 12 << 20;
  st.interning_bytes = 200000;
  return st;
}

TracingSession::Report MakeReport(uint64_t bpf_events) {
  TracingSession::Report r;
  r.sources.push_back({"linux.bpf",
                       SourceReport::State::kRunning,
                       "",
                       bpf_events,
                       {{1, "sched_switch", 7}, {0, "bpf_missed_runs", 3}},
                       {absl::Milliseconds(1500), absl::Milliseconds(250), 3},
                       {uint64_t{8} << 20, 0},
                       uint64_t{1} << 20,
                       BpfStacks()});
  r.sources.push_back({"linux.ftrace",
                       SourceReport::State::kFailed,
                       "tracefs is not mounted",
                       0,
                       {},
                       {},
                       {},
                       0,
                       {}});

  TracingSession::BufferReport b;
  b.stats.buffer_size = 64 << 20;
  b.stats.bytes_written = 100 << 20;
  b.stats.bytes_overwritten = 36 << 20;
  b.stats.write_wrap_count = 2;
  b.used_bytes = 16 << 20;
  r.buffers.push_back(b);
  buffer::DurableStore::Stats d;
  d.entries = 155;
  d.bytes = 17000;
  d.capacity = 4 << 20;
  d.evicted_live = 1;
  r.durable = d;
  return r;
}

TEST(AgentStatusTest, RatesAreTheEventsOfTheLastHealthPeriod) {
  AgentStatus status(kStart);
  status.Tick(MakeReport(1000), kStart + absl::Seconds(10));
  EXPECT_EQ(status.HealthLine(MakeReport(1000), 0),
            "linux.bpf 100 events/s; linux.ftrace failed; buffer 64.0 MiB 25% full; 0 snapshots; "
            "10 events lost");
  status.Tick(MakeReport(6000), kStart + absl::Seconds(20));
  EXPECT_EQ(status.HealthLine(MakeReport(6000), 3),
            "linux.bpf 500 events/s; linux.ftrace failed; buffer 64.0 MiB 25% full; 3 snapshots; "
            "10 events lost");
}

TEST(AgentStatusTest, TheStoppedLineSaysHowLongItRanWhatItRecordedAndLost) {
  AgentStatus status(kStart);
  TracingSession::Progress p;
  p.events = 1234;
  p.events_lost = 5;
  SnapshotWriter::Stats snaps;
  snaps.written = 3;
  EXPECT_EQ(status.StoppedLine(p, snaps, kStart + absl::Seconds(3723) + absl::Milliseconds(900)),
            "stopped after 1h2m3s: 1234 events recorded, 5 lost before the buffers; "
            "3 snapshots written");
  snaps.failed = 1;
  EXPECT_EQ(status.StoppedLine(p, snaps, kStart + absl::Microseconds(48'700)),
            "stopped after 48ms: 1234 events recorded, 5 lost before the buffers; "
            "3 snapshots written, 1 failed");
}

TEST(AgentStatusTest, BeforeTheFirstTickTheRateIsTheAverageSinceTheStart) {
  AgentStatus status(kStart);
  const control::StatusReply st =
      status.Reply(MakeReport(4000), kStart + absl::Seconds(2), "/etc/ringside/agent.pbtxt", {}, 0);
  ASSERT_EQ(st.sources_size(), 2);
  EXPECT_DOUBLE_EQ(st.sources(0).events_per_s(), 2000);
  EXPECT_EQ(st.uptime_ms(), 2000u);
}

TEST(AgentStatusTest, TheReplyCarriesEverySourceBufferAndSnapshotFigure) {
  AgentStatus status(kStart);
  SnapshotWriter::Stats snaps;
  snaps.written = 4;
  snaps.last_path = "/var/lib/ringside/snapshots/h-20261123T000000Z-crash.pftrace";
  snaps.last_reason = "crash";
  snaps.failed = 2;
  snaps.last_error = "cannot write /s/x.pftrace: No space left on device";
  const control::StatusReply st =
      status.Reply(MakeReport(10), kStart + absl::Seconds(1), "/c.pbtxt", snaps, 49);
  EXPECT_EQ(st.config_path(), "/c.pbtxt");
  ASSERT_EQ(st.sources_size(), 2);
  EXPECT_EQ(st.sources(0).state(), control::SourceStatus::RUNNING);
  ASSERT_EQ(st.sources(0).losses_size(), 2);
  EXPECT_EQ(st.sources(0).losses(0).cpu(), 1);
  EXPECT_EQ(st.sources(0).losses(0).kind(), "sched_switch");
  EXPECT_EQ(st.sources(0).losses(0).events(), 7u);
  // The reader thread's CPU and the budget's pauses, in seconds.
  EXPECT_DOUBLE_EQ(st.sources(0).reader_cpu_seconds(), 1.5);
  EXPECT_DOUBLE_EQ(st.sources(0).reader_paused_seconds(), 0.25);
  // The stacks, where the source records them.
  ASSERT_TRUE(st.sources(0).has_stacks());
  EXPECT_EQ(st.sources(0).stacks().blocked_samples(), 500u);
  EXPECT_EQ(st.sources(0).stacks().cpu_samples(), 70u);
  EXPECT_EQ(st.sources(0).stacks().frames_named(), 90u);
  EXPECT_EQ(st.sources(0).stacks().frames_unnamed(), 4u);
  EXPECT_EQ(st.sources(0).stacks().maps_reads(), 9u);
  EXPECT_EQ(st.sources(0).stacks().maps_unreadable(), 3u);
  EXPECT_EQ(st.sources(0).stacks().callstacks(), 31u);
  EXPECT_EQ(st.sources(0).stacks().interned_bytes(), 30000u);
  EXPECT_EQ(st.sources(0).stacks().generations(), 2u);
  EXPECT_EQ(st.sources(0).stacks().remembered_stacks(), 35u);
  EXPECT_EQ(st.sources(0).stacks().symbol_bytes(), 12u << 20);
  EXPECT_EQ(st.sources(0).stacks().interning_bytes(), 200000u);
  EXPECT_FALSE(st.sources(1).has_stacks());
  EXPECT_EQ(st.sources(1).state(), control::SourceStatus::FAILED);
  EXPECT_EQ(st.sources(1).error(), "tracefs is not mounted");
  ASSERT_EQ(st.buffers_size(), 1);
  EXPECT_EQ(st.buffers(0).size_bytes(), 64u << 20);
  EXPECT_EQ(st.buffers(0).bytes_overwritten(), 36u << 20);
  EXPECT_EQ(st.buffers(0).write_wraps(), 2u);
  EXPECT_DOUBLE_EQ(st.buffers(0).fill_percent(), 25);
  EXPECT_EQ(st.durable().entries(), 155u);
  EXPECT_EQ(st.durable().evicted_live(), 1u);
  EXPECT_EQ(st.snapshots().count(), 4u);
  EXPECT_EQ(st.snapshots().last_reason(), "crash");
  EXPECT_EQ(st.snapshots().suppressed(), 49u);
  EXPECT_EQ(st.snapshots().failed(), 2u);
  EXPECT_EQ(st.snapshots().last_error(), "cannot write /s/x.pftrace: No space left on device");
  EXPECT_EQ(st.pid(), getpid());
  EXPECT_GT(st.rss_bytes(), 0u);
  // This process's own memory, read for real.
  EXPECT_GT(st.memory().proportional_bytes(), 0u);
}

TEST(AgentStatusTest, MemoryNamesTheStagingOfEverySourceAndTheBuffers) {
  AgentMemory read;
  read.cgroup = "/system.slice/ringside.service";
  read.cgroup_bytes = 90 << 20;
  read.cgroup_limit_bytes = 512 << 20;
  read.proportional_bytes = 80 << 20;
  TracingSession::Report report = MakeReport(10);
  report.sources.push_back({"linux.ftrace",
                            SourceReport::State::kRunning,
                            "",
                            0,
                            {},
                            {},
                            {0, uint64_t{4} << 20},
                            uint64_t{1} << 20,
                            {}});
  control::MemoryStatus m;
  SetMemory(report, read, &m);
  EXPECT_EQ(m.cgroup(), "/system.slice/ringside.service");
  EXPECT_EQ(m.cgroup_bytes(), 90u << 20);
  EXPECT_EQ(m.cgroup_limit_bytes(), 512u << 20);
  EXPECT_EQ(m.proportional_bytes(), 80u << 20);
  EXPECT_EQ(m.bpf_ring_bytes(), 8u << 20);
  EXPECT_EQ(m.ftrace_buffer_bytes(), 4u << 20);
  EXPECT_EQ(m.chunk_pool_bytes(), 2u << 20);
  EXPECT_EQ(m.buffer_bytes(), (64u << 20) + (4u << 20)) << "the central ring and the durable store";
  EXPECT_EQ(m.symbol_bytes(), 12u << 20);
  EXPECT_EQ(m.stack_interning_bytes(), 200000u);
}

// A recording of linux.bpf with `stacks` (its bpf_config.stacks fields),
// for real: root only (CAP_BPF and CAP_PERFMON).
std::unique_ptr<TracingSession> StartStacks(const std::string& stacks) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig(absl::StrCat("buffers { size_kb: 2048 }\ndurable_buffer_size_kb: 1024\n"
                               "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
                               "  sched: true stacks { blocked: true ",
                               stacks, " } } } }\n"),
                  "test.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  if (!cfg.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(*cfg);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

// This thread blocks and runs, in turns, until `done` says the report has
// what the test waits for (at most 10 s); the last report.
template <typename Done>
TracingSession::Report WorkUntil(const TracingSession& session, Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  TracingSession::Report r = session.report();
  while (!done(r) && absl::Now() < deadline) {
    for (int i = 0; i < 20; i++) {
      usleep(1000);
      for (const absl::Time spin = absl::Now() + absl::Milliseconds(1); absl::Now() < spin;) {
      }
    }
    r = session.report();
  }
  return r;
}

TEST(AgentStatusTest, RecordedStacksShowTheirSamplesAndWhatNamesThemInStatusAndMetrics) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  std::unique_ptr<TracingSession> session = StartStacks("cpu_hz: 99");
  ASSERT_NE(session, nullptr);
  const TracingSession::Report r = WorkUntil(*session, [](const TracingSession::Report& r) {
    return r.sources.size() == 1 && r.sources[0].stacks.blocked_samples > 0 &&
           r.sources[0].stacks.cpu_samples > 0;
  });
  AgentStatus status(kStart);
  const control::StatusReply st = status.Reply(r, absl::Now(), "", {}, 0);
  ASSERT_EQ(st.sources_size(), 1);
  ASSERT_TRUE(st.sources(0).has_stacks());
  const control::StackStatus& stacks = st.sources(0).stacks();
  EXPECT_GT(stacks.blocked_samples(), 0u);
  EXPECT_GT(stacks.cpu_samples(), 0u);
  EXPECT_GT(stacks.callstacks(), 0u);
  EXPECT_GT(stacks.frames_named(), 0u) << "kallsyms names the kernel's frames";
  EXPECT_GT(stacks.interned_bytes(), 0u);
  EXPECT_GE(stacks.generations(), 1u);
  // kallsyms alone is hundreds of KiB.
  EXPECT_GT(stacks.symbol_bytes(), 100u << 10);
  std::printf("symbol caches %llu bytes, interning tables %llu bytes\n",
              static_cast<unsigned long long>(stacks.symbol_bytes()),
              static_cast<unsigned long long>(stacks.interning_bytes()));
  EXPECT_GT(stacks.interning_bytes(), 0u);
  // How blocked stacks are taken, as this kernel allows: sampled below the
  // default period as threads run again (kprobes), else every block.
  EXPECT_NE(stacks.blocked_at_switch(), stacks.blocked_period_ns() == 1'000'000u)
      << "at the switch " << stacks.blocked_at_switch() << ", period "
      << stacks.blocked_period_ns();
  EXPECT_EQ(st.memory().symbol_bytes(), stacks.symbol_bytes());
  EXPECT_EQ(st.memory().stack_interning_bytes(), stacks.interning_bytes());
  const std::string text = PrometheusText(st, {});
  EXPECT_EQ(testing::SampleValue(
                text, R"(ringside_stack_samples_total{source="linux.bpf",counter="blocked_time"})"),
            static_cast<double>(stacks.blocked_samples()));
  EXPECT_EQ(testing::SampleValue(text, R"(ringside_memory_bytes{part="symbol_caches"})"),
            static_cast<double>(stacks.symbol_bytes()));
  ASSERT_TRUE(session->Stop().ok());
}

// One frame a stack: every deeper stack is cut at its root and counted as
// truncated, on the CPU it happened on. Those losses reach status, metrics
// and the file's stats as every record type's do.
TEST(AgentStatusTest, StacksLostAreCountedByKindAndCpuInStatusMetricsAndTheFile) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  std::unique_ptr<TracingSession> session = StartStacks("max_depth: 1 cpu_hz: 0");
  ASSERT_NE(session, nullptr);
  const auto truncated = [](const DataSource::Loss& l) { return l.kind == "stack_truncated"; };
  const TracingSession::Report r = WorkUntil(*session, [&](const TracingSession::Report& r) {
    return r.sources.size() == 1 &&
           std::any_of(r.sources[0].losses.begin(), r.sources[0].losses.end(), truncated);
  });
  ASSERT_EQ(r.sources.size(), 1u);
  uint64_t lost = 0;
  for (const DataSource::Loss& l : r.sources[0].losses) lost += truncated(l) ? l.events : 0;
  ASSERT_GT(lost, 0u) << "no stack was deeper than one frame";

  AgentStatus status(kStart);
  const control::StatusReply st = status.Reply(r, absl::Now(), "", {}, 0);
  uint64_t in_status = 0;
  for (const control::SourceStatus::Loss& l : st.sources(0).losses()) {
    if (l.kind() != "stack_truncated") continue;
    in_status += l.events();
    EXPECT_GE(l.cpu(), 0) << "counted on the CPU it happened on";
  }
  EXPECT_EQ(in_status, lost);
  const std::string text = PrometheusText(st, {});
  EXPECT_EQ(testing::SampleValue(text, R"(ringside_staging_events_lost_total{source="linux.bpf",)"
                                       R"(kind="stack_truncated"})"),
            static_cast<double>(lost));

  ASSERT_TRUE(session->Stop().ok());
  StringSink sink;
  ASSERT_TRUE(session->WriteTrace(&sink).ok());
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(sink.data()));
  uint64_t in_file = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& l : p.trace_stats().ringside_staging_loss()) {
      if (l.data_source() == "linux.bpf" && l.kind() == "stack_truncated") {
        in_file += l.events_lost();
      }
    }
  }
  EXPECT_GE(in_file, lost) << "the file's count, taken at the stop, is the latest";
}

}  // namespace
}  // namespace ringside::agent
