// The linux.ftrace data source against the real kernel.

#include "agent/sources/ftrace_data_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/session/buffer_reader.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

struct Recorded {
  std::vector<std::string> markers;
  std::vector<trace::FtraceStats> stats;
  uint64_t bundles_with_lost_events = 0;
  uint64_t compact_switches = 0;
};

Recorded ReadBack(buffer::TraceBuffer* tb, const std::string& marker_prefix) {
  Recorded r;
  for (const testing::ReadPacket& read : testing::ReadAllPackets(tb)) {
    const trace::TracePacket& p = read.packet;
    if (p.has_ftrace_stats()) r.stats.push_back(p.ftrace_stats());
    if (!p.has_ftrace_events()) continue;
    if (p.ftrace_events().lost_events()) r.bundles_with_lost_events++;
    r.compact_switches +=
        static_cast<uint64_t>(p.ftrace_events().compact_sched().switch_timestamp_size());
    for (const auto& e : p.ftrace_events().event()) {
      if (e.has_print() && e.print().buf().rfind(marker_prefix, 0) == 0) {
        std::string text = e.print().buf();
        if (!text.empty() && text.back() == '\n') text.pop_back();
        r.markers.push_back(text);
      }
    }
  }
  return r;
}

void WriteMarkers(const std::string& instance_path, const std::string& prefix, int n) {
  const int fd = open((instance_path + "/trace_marker").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < n; i++) {
    const std::string text = absl::StrCat(prefix, i);
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  close(fd);
}

std::string InstancePath(const std::string& name) {
  return ftrace::testing::InstanceHeldByThisProcess(name);
}

TEST(FtraceDataSourceTest, ReaderThreadRecordsEveryMarkerInOrderWithStartAndEndStats) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto tb = buffer::TraceBuffer::Create(16 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  FtraceDataSource::Config config;
  config.instance_name = "t-ds";
  config.events = {{"sched/sched_switch", ""}};
  config.drain_period_ms = 20;
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(), config, &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->applied_trace_clock(), "boot");
  EXPECT_GE((*ds)->applied_buffer_size_kb(), 2048u);
  ASSERT_TRUE((*ds)->Start().ok());
  for (int round = 0; round < 4; round++) {
    WriteMarkers(InstancePath("t-ds"), absl::StrCat("ds marker r", round, " "), 100);
    usleep(30 * 1000);
    producer.CommitQueuedInto(tb.get());
  }
  (*ds)->Stop();
  producer.CommitQueuedInto(tb.get());
  EXPECT_GT((*ds)->stats().pages_read, 0u);
  EXPECT_EQ((*ds)->stats().pages_malformed, 0u);

  Recorded r = ReadBack(tb.get(), "ds marker");
  ASSERT_EQ(r.markers.size(), 400u);
  for (int round = 0, i = 0; round < 4; round++) {
    for (int k = 0; k < 100; k++, i++) {
      EXPECT_EQ(r.markers[i], absl::StrCat("ds marker r", round, " ", k));
    }
  }
  ASSERT_EQ(r.stats.size(), 2u);
  EXPECT_EQ(r.stats[0].phase(), trace::FtraceStats::START_OF_TRACE);
  EXPECT_EQ(r.stats[1].phase(), trace::FtraceStats::END_OF_TRACE);
  uint64_t read_events = 0;
  for (const auto& c : r.stats[1].cpu_stats()) read_events += c.read_events();
  EXPECT_GE(read_events, 400u);
  EXPECT_EQ(r.bundles_with_lost_events, 0u);
}

// A rare event only, and the reader's period far away: what is in the
// kernel's buffer stays there unless something asks for it.
FtraceDataSource::Config SlowReaderConfig(const std::string& instance) {
  FtraceDataSource::Config config;
  config.instance_name = instance;
  config.events = {{"sched/sched_process_exec", ""}};
  config.drain_period_ms = 10'000;
  config.buffer_percent = 100;
  return config;
}

TEST(FtraceDataSourceTest, FlushStagingHandsOverWhatTheKernelBufferHoldsNow) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto tb = buffer::TraceBuffer::Create(4 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(),
                                     SlowReaderConfig("t-ds-flush"), &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  usleep(50'000);  // The reader is in its long wait.
  WriteMarkers(InstancePath("t-ds-flush"), "flush marker ", 10);
  EXPECT_TRUE((*ds)->FlushStaging(absl::Seconds(5)));
  producer.CommitQueuedInto(tb.get());
  EXPECT_EQ(ReadBack(tb.get(), "flush marker").markers.size(), 10u);
  (*ds)->Stop();
}

TEST(FtraceDataSourceTest, FlushStagingOfASourceThatIsNotReadingReturnsFalseAtOnce) {
  RINGSIDE_REQUIRE_TRACEFS();
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(),
                                     SlowReaderConfig("t-ds-noflush"), &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  // An hour: a wait would hang the test, not just slow it.
  EXPECT_FALSE((*ds)->FlushStaging(absl::Hours(1)));  // Not started.
  ASSERT_TRUE((*ds)->Start().ok());
  (*ds)->Stop();
  EXPECT_FALSE((*ds)->FlushStaging(absl::Hours(1)));  // Stopped.
}

TEST(FtraceDataSourceTest, UnknownEventsAndBadFiltersAreNamedInTheStats) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto tb = buffer::TraceBuffer::Create(4 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  FtraceDataSource::Config config;
  config.instance_name = "t-ds-bad";
  config.events = {{"sched/sched_switch", ""}, {"nope/nope", ""}, {"sched/sched_waking", "pid =="}};
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(), config, &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  (*ds)->Stop();
  producer.CommitQueuedInto(tb.get());
  Recorded r = ReadBack(tb.get(), "-");
  ASSERT_FALSE(r.stats.empty());
  ASSERT_EQ(r.stats[0].unknown_ftrace_events_size(), 1);
  EXPECT_EQ(r.stats[0].unknown_ftrace_events(0), "nope/nope");
  ASSERT_EQ(r.stats[0].failed_ftrace_events_size(), 1);
  EXPECT_NE(r.stats[0].failed_ftrace_events(0).find("sched/sched_waking"), std::string::npos);
}

TEST(FtraceDataSourceTest, NoEnabledEventIsAnErrorNamingThem) {
  RINGSIDE_REQUIRE_TRACEFS();
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  FtraceDataSource::Config config;
  config.instance_name = "t-ds-none";
  config.events = {{"nope/nope", ""}};
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(), config, &producer);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("nope/nope"), std::string::npos) << ds.status();
}

// The source's tally of what it wrote, against the kernel and the buffer:
// per CPU, the events written (committed or dropped for want of a chunk)
// are the events the kernel says were read from that CPU's buffer, and per
// CPU and kind, those committed are what the buffer gives back, counted
// with libprotobuf here and with CountEventsByKind by the session's reader.
TEST(FtraceDataSourceTest, EventTalliesMatchTheKernelsReadCountAndTheBuffer) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto tb = buffer::TraceBuffer::Create(16 << 20);
  // 32 KiB of chunks: a read of thousands of markers does not fit.
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{.num_chunks = 8});
  FtraceDataSource::Config config;
  config.instance_name = "t-ds-tally";
  // sched_stat_runtime, where the kernel has it, in the generic form. Only
  // this process's scheduling: a loaded machine's, thousands between two
  // reads, filled the 8 chunks with them alone and every marker's bundle
  // was dropped (0 of 20 committed, under a pipe storm beside the test).
  const std::string me = std::to_string(getpid());
  config.events = {{"sched/sched_switch", "prev_pid == " + me + " || next_pid == " + me},
                   {"sched/sched_waking", "pid == " + me},
                   {"sched/sched_stat_runtime", "pid == " + me}};
  config.reader_thread = false;  // The test reads.
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(), config, &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  // A few markers read and committed; thousands read with the chunks not
  // given back (their bundle is dropped); a few more once they are.
  WriteMarkers(InstancePath("t-ds-tally"), "tally a", 10);
  (*ds)->ReadKernelBuffers();
  producer.CommitQueuedInto(tb.get());
  WriteMarkers(InstancePath("t-ds-tally"), "tally b", 3000);
  (*ds)->ReadKernelBuffers();
  producer.CommitQueuedInto(tb.get());
  WriteMarkers(InstancePath("t-ds-tally"), "tally c", 10);
  (*ds)->Stop();
  producer.CommitQueuedInto(tb.get());

  const std::vector<DataSource::EventTally> tallies = (*ds)->EventTallies();
  std::map<uint32_t, uint64_t> written_per_cpu;
  uint64_t committed = 0, dropped = 0;
  for (const DataSource::EventTally& t : tallies) {
    written_per_cpu[t.cpu] += t.committed + t.pool_dropped;
    committed += t.committed;
    dropped += t.pool_dropped;
  }
  EXPECT_GT(committed, 0u);
  EXPECT_GT(dropped, 0u) << "the chunk pool was meant to run out";
  // The markers, the only prints of the instance: the second batch's went
  // with their bundle, the others are in the buffer.
  uint64_t prints_committed = 0, prints_dropped = 0;
  for (const DataSource::EventTally& t : tallies) {
    if (t.kind != "print") continue;
    prints_committed += t.committed;
    prints_dropped += t.pool_dropped;
  }
  EXPECT_EQ(prints_committed, 20u);
  EXPECT_EQ(prints_dropped, 3000u);
  EXPECT_EQ(committed + dropped, (*ds)->stats().events);

  // One read of the buffer (reading consumes), as the session's reader
  // does; its count by CountEventsByKind is what the tally committed.
  BufferPacketReader reader;
  std::string out;
  reader.ReadInto({tb.get()}, &out);
  for (const DataSource::EventTally& t : tallies) {
    EXPECT_EQ(reader.events_of(1, t.cpu, t.field), t.committed) << t.kind << " on CPU " << t.cpu;
  }

  // And per CPU and kind as libprotobuf reads the same packets.
  trace::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out));
  std::map<std::pair<uint32_t, std::string>, uint64_t> in_buffer;
  std::vector<trace::FtraceStats> stats;
  std::vector<std::string> markers;
  for (const trace::TracePacket& p : trace.packet()) {
    if (p.has_ftrace_stats()) stats.push_back(p.ftrace_stats());
    if (!p.has_ftrace_events()) continue;
    const uint32_t cpu = p.ftrace_events().cpu();
    const auto& cs = p.ftrace_events().compact_sched();
    in_buffer[{cpu, "sched_switch"}] += static_cast<uint64_t>(cs.switch_timestamp_size());
    in_buffer[{cpu, "sched_waking"}] += static_cast<uint64_t>(cs.waking_timestamp_size());
    for (const auto& e : p.ftrace_events().event()) {
      in_buffer[{cpu, e.has_print() ? "print" : e.has_generic() ? "generic" : "other"}]++;
      if (e.has_print()) markers.push_back(e.print().buf());
    }
  }
  for (const DataSource::EventTally& t : tallies) {
    const std::pair<uint32_t, std::string> key(t.cpu, t.kind);
    EXPECT_EQ(in_buffer[key], t.committed) << t.kind << " on CPU " << t.cpu;
    in_buffer.erase(key);
  }
  for (const auto& [key, n] : in_buffer) {
    EXPECT_EQ(n, 0u) << key.second << " on CPU " << key.first << " is in no tally";
  }
  ASSERT_EQ(markers.size(), 20u);
  EXPECT_EQ(markers.front().rfind("tally a0", 0), 0u) << markers.front();
  EXPECT_EQ(markers.back().rfind("tally c9", 0), 0u) << markers.back();

  // The kernel's count of the events read from each CPU's buffer
  // (END_OF_TRACE, taken after the last read), none of them lost before.
  ASSERT_EQ(stats.size(), 2u) << "the stats packets were meant to find a chunk";
  ASSERT_EQ(stats[1].phase(), trace::FtraceStats::END_OF_TRACE);
  for (const auto& c : stats[1].cpu_stats()) {
    EXPECT_EQ(c.overrun(), 0u);
    EXPECT_EQ(written_per_cpu[c.cpu()], c.read_events()) << "CPU " << c.cpu();
  }
}

TEST(FtraceDataSourceTest, TinyBufferBurstReportsOverrunAndLostEventsWithoutCrashing) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto tb = buffer::TraceBuffer::Create(16 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  FtraceDataSource::Config config;
  config.instance_name = "t-ds-burst";
  config.events = {{"sched/sched_switch", ""}};
  config.buffer_size_kb = 8;
  config.reader_thread = false;  // Nothing drains during the burst.
  auto ds = FtraceDataSource::Create(*ftrace::testing::KernelTracefs(), config, &producer);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  WriteMarkers(InstancePath("t-ds-burst"), "burst ", 20000);
  (*ds)->Stop();
  producer.CommitQueuedInto(tb.get());
  Recorded r = ReadBack(tb.get(), "burst ");
  ASSERT_EQ(r.stats.size(), 2u);
  uint64_t overrun = 0;
  for (const auto& c : r.stats[1].cpu_stats()) overrun += c.overrun();
  EXPECT_GT(overrun, 0u);
  EXPECT_GT((*ds)->stats().pages_with_lost_events, 0u);
  EXPECT_GT(r.bundles_with_lost_events, 0u);
  EXPECT_LT(r.markers.size(), 20000u);
  EXPECT_GT(r.markers.size(), 0u);
}

}  // namespace
}  // namespace ringside::agent
