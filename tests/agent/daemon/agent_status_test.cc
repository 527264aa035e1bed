#include "agent/daemon/agent_status.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using SourceReport = TracingSession::SourceReport;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

TracingSession::Report MakeReport(uint64_t bpf_events) {
  TracingSession::Report r;
  r.sources.push_back({"linux.bpf",
                       SourceReport::State::kRunning,
                       "",
                       bpf_events,
                       {{1, "sched_switch", 7}, {0, "bpf_missed_runs", 3}},
                       {absl::Milliseconds(1500), absl::Milliseconds(250), 3},
                       {uint64_t{8} << 20, 0},
                       uint64_t{1} << 20});
  r.sources.push_back(
      {"linux.ftrace", SourceReport::State::kFailed, "tracefs is not mounted", 0, {}, {}, {}, 0});

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
                            uint64_t{1} << 20});
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
}

}  // namespace
}  // namespace ringside::agent
