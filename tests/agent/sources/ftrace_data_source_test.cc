// The linux.ftrace data source against the real kernel.

#include "agent/sources/ftrace_data_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
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
