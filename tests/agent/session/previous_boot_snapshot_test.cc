// SessionSnapshot::OfPreviousBoot: an earlier boot's pages as a snapshot
// file of that boot, on the wall-clock time it happened.

#include <memory>
#include <string>
#include <vector>

#include "agent/session/session_snapshot.h"
#include "agent/tracefile/trace_sink.h"
#include "ftrace/event_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/ftrace/testing/fake_page.h"
#include "tests/ftrace/testing/kernel_formats.h"

namespace ringside::agent {
namespace {

using ftrace::testing::FakePage;
using ftrace::testing::SchedSwitchRecord;

std::unique_ptr<PreviousBootReader> ReaderOf(std::vector<std::vector<uint8_t>> cpu0,
                                             std::vector<std::vector<uint8_t>> cpu1) {
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(ftrace::testing::CpuReaderOfPages(0, cpu0));
  readers.push_back(ftrace::testing::CpuReaderOfPages(1, cpu1));
  return PreviousBootReader::ForTesting(
      ftrace::testing::SchedSwitchAndPrintTable(),
      ftrace::PageParser(ftrace::PageHeaderFormat{}, ftrace::EventHeaderFormat{}),
      std::move(readers));
}

MachineIdentity ThisMachine() { return {"node-7", 1234, "this-boot", "/etc/machine-id"}; }

// The previous boot's marker: its BOOTTIME 2 s was 2026-12-03 10:00:00 UTC.
constexpr int64_t kMarkerBoottime = 2'000'000'000;
constexpr int64_t kMarkerRealtime = 1'796'292'000'000'000'000;

TEST(PreviousBootSnapshotTest, IsAFileOfThatBootOnTheWallClockItHappened) {
  std::unique_ptr<PreviousBootReader> reader = ReaderOf(
      {FakePage(3'000'000'000).Data(10, SchedSwitchRecord(1, "init", 42, "kt-named")).Finish()},
      {FakePage(5'000'000'000)
           .Data(0, SchedSwitchRecord(42, "kt-named", 0, "swapper/1"))
           .Finish()});
  const BootRecorder::Marker marker{"earlier-boot", "6.12.0", "rack 4 node 7", kMarkerBoottime,
                                    kMarkerRealtime};
  PreviousBootReader::Stats stats;
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap =
      SessionSnapshot::OfPreviousBoot(reader.get(), marker, 12216, ThisMachine(), &stats);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(stats.events, 2u);
  EXPECT_EQ((*snap)->trigger().name, "previous_boot");
  EXPECT_EQ((*snap)->trigger().boottime_ns, 5'000'000'000);
  StringSink sink;
  ASSERT_TRUE((*snap)->WriteTo(&sink).ok());
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(sink.data()));

  int switches = 0, clocks = 0, process_trees = 0;
  std::string boot_id, machine_name;
  for (const trace::TracePacket& p : t.packet()) {
    EXPECT_EQ(p.machine_id(), 1234u);
    if (p.has_system_info()) {
      boot_id = p.system_info().boot_id();
      machine_name = p.system_info().machine_name();
    }
    if (p.has_process_tree()) process_trees++;
    switches += p.ftrace_events().compact_sched().switch_timestamp_size();
    if (p.has_clock_snapshot()) {
      clocks++;
      int64_t boottime = -1, realtime = -1;
      for (const trace::ClockSnapshot::Clock& c : p.clock_snapshot().clocks()) {
        if (c.clock_id() == trace::ClockSnapshot::Clock::BOOTTIME) boottime = c.timestamp();
        if (c.clock_id() == trace::ClockSnapshot::Clock::REALTIME) realtime = c.timestamp();
      }
      // Every snapshot pairs the clocks as the marker did.
      EXPECT_EQ(realtime - boottime, kMarkerRealtime - kMarkerBoottime);
    }
  }
  EXPECT_EQ(switches, 2);
  EXPECT_EQ(clocks, 2);
  // That boot's id and the machine's name as its marker gave it; no
  // process scan of this boot's processes.
  EXPECT_EQ(boot_id, "earlier-boot");
  EXPECT_EQ(machine_name, "rack 4 node 7");
  EXPECT_EQ(process_trees, 0);
}

TEST(PreviousBootSnapshotTest, NoEventsMakeNoFile) {
  std::unique_ptr<PreviousBootReader> reader = ReaderOf({FakePage(1000).Finish()}, {});
  PreviousBootReader::Stats stats;
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap =
      SessionSnapshot::OfPreviousBoot(reader.get(), {"b", "", "", 0, 0}, 64, ThisMachine(), &stats);
  EXPECT_TRUE(absl::IsNotFound(snap.status())) << snap.status();
  EXPECT_EQ(stats.pages, 1u);
}

}  // namespace
}  // namespace ringside::agent
