// BootRecorder against a tracefs tree of regular files laid out as Linux
// 6.12 lays out a boot-mapped instance: what it does with each thing the
// instance may hold. The real instance is exercised in the kernel matrix
// (tests/kernels, 6.12 booted with reserve_mem and trace_instance=).

#include "agent/sources/boot_recorder.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "ftrace/tracefs.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/read_packets.h"
#include "tests/ftrace/testing/fake_page.h"
#include "tests/ftrace/testing/kernel_formats.h"

namespace ringside::agent {
namespace {

using State = BootRecorder::Report::State;

std::string ThisKernel() {
  utsname u;
  return uname(&u) == 0 ? u.release : "";
}
constexpr char kThisBoot[] = "6b1f0c3e-0000-4000-8000-000000000001";
constexpr char kEarlierBoot[] = "6b1f0c3e-0000-4000-8000-000000000002";

class FakeBootInstance {
 public:
  FakeBootInstance() {
    mkdir(dir_.Join("instances").c_str(), 0755);
    mkdir(dir_.Join(kRel).c_str(), 0755);
    Write("last_boot_info", "text delta:\t0\ndata delta:\t0\n");
    Write("tracing_on", "0\n");
    Write("buffer_total_size_kb", "12216\n");
    Write("trace_clock", "local global counter uptime perf mono mono_raw [boot] x86-tsc\n");
    Write("trace", "# tracer: nop\n#\n");
    Write("trace_marker", "");
    Write("set_event", "");
    Write("current_tracer", "nop\n");
    Write("events/enable", "0\n");
    for (const char* e :
         {"sched/sched_switch", "sched/sched_waking", "printk/console", "irq/irq_handler_entry"}) {
      Write(absl::StrCat("events/", e, "/enable"), "0\n");
    }
    const long cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (long cpu = 0; cpu < cpus; cpu++) SetEntries(static_cast<int>(cpu), 0);
  }
  void Write(const std::string& rel, const std::string& text) {
    std::string path = dir_.Join(kRel);
    for (size_t start = 0, slash; (slash = rel.find('/', start)) != std::string::npos;
         start = slash + 1) {
      mkdir(dir_.Join(absl::StrCat(kRel, "/", rel.substr(0, slash))).c_str(), 0755);
    }
    std::ofstream(absl::StrCat(path, "/", rel)) << text;
  }
  void WriteAtRoot(const std::string& rel, const std::string& text) {
    for (size_t start = 0, slash; (slash = rel.find('/', start)) != std::string::npos;
         start = slash + 1) {
      mkdir(dir_.Join(rel.substr(0, slash)).c_str(), 0755);
    }
    std::ofstream(dir_.Join(rel)) << text;
  }
  std::string Read(const std::string& rel) const {
    std::ifstream in(absl::StrCat(dir_.Join(kRel), "/", rel));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void SetEntries(int cpu, int entries) {
    Write(absl::StrCat("per_cpu/cpu", cpu, "/stats"),
          absl::StrCat("entries: ", entries,
                       "\noverrun: 0\ncommit overrun: 0\nbytes: 0\n"
                       "oldest event ts:     0.000000\nnow ts:     2.070631\n"
                       "dropped events: 0\nread events: 0\n"));
  }
  // The text `trace` with events, one of them ringside's marker of `boot`
  // by kernel `kernel` (this one's by default).
  void HoldEvents(const std::string& boot, const std::string& kernel = ThisKernel()) {
    SetEntries(0, 3);
    Write("trace",
          absl::StrCat(
              "# tracer: nop\n"
              "  sh-1 [000] ..... 2.1: tracing_mark_write: ",
              BootRecorder::MarkerText({boot, kernel, "node-7", 2100000000, 1764700000000000000}),
              "\n  sh-1 [000] d..1. 3.1: console: msg=Kernel panic - not syncing\n"));
  }
  // The kernel's page layout and the formats of sched_switch and print at
  // the tracefs root, and CPU 0's ring holding one page of `switches`
  // sched_switch records (the other CPUs' rings empty), for the earlier
  // boot's events to be read from trace_pipe_raw.
  void HoldPages(int switches) {
    WriteAtRoot("events/header_page", ftrace::testing::kHeaderPage);
    WriteAtRoot("events/header_event", ftrace::testing::kHeaderEvent);
    WriteAtRoot("events/sched/sched_switch/format", ftrace::testing::kSchedSwitchFormat);
    WriteAtRoot("events/ftrace/print/format", ftrace::testing::kPrintFormat);
    ftrace::testing::FakePage page(1000);
    for (int i = 0; i < switches; i++) {
      std::string record(64, '\0');
      const uint16_t id = 372;  // kSchedSwitchFormat's.
      std::memcpy(record.data(), &id, 2);
      page.Data(10, record);
    }
    const std::vector<uint8_t> bytes = page.Finish();
    const long cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (long cpu = 0; cpu < cpus; cpu++) {
      Write(absl::StrCat("per_cpu/cpu", cpu, "/trace_pipe_raw"),
            cpu == 0 ? std::string(bytes.begin(), bytes.end()) : std::string());
    }
  }
  ftrace::Tracefs tracefs() const { return ftrace::Tracefs::AtRootForTesting(dir_.path()); }
  std::string path() const { return dir_.Join(kRel); }

 private:
  static constexpr char kRel[] = "instances/boot_mapped";
  testing::ScratchDir dir_;
};

BootRecorder::Options ThisBoot() { return {"boot_mapped", kThisBoot, "node-7", {}}; }

// Starts a recorder of this boot on `fake`, which must not record; the
// state it reports, its detail in *detail.
State LeftAloneAs(const FakeBootInstance& fake, std::string* detail = nullptr) {
  BootRecorder::Report report;
  EXPECT_EQ(BootRecorder::Start(fake.tracefs(), ThisBoot(), &report), nullptr);
  if (detail != nullptr) *detail = report.detail;
  return report.state;
}

TEST(BootRecorderTest, AnEmptyInstanceIsRecordedIntoAndMarkedWithThisBoot) {
  FakeBootInstance fake;
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r = BootRecorder::Start(fake.tracefs(), ThisBoot(), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  EXPECT_EQ(report.state, State::kRecording);
  EXPECT_FALSE(report.resumed);
  EXPECT_EQ(report.buffer_kb, 12216u);
  EXPECT_EQ(fake.Read("tracing_on"), "1");
  EXPECT_EQ(fake.Read("events/sched/sched_switch/enable"), "1");
  EXPECT_EQ(fake.Read("events/printk/console/enable"), "1");
  // The events this kernel lacks are left out, not failed.
  EXPECT_EQ(report.events.size(), 3u);
  const std::optional<BootRecorder::Marker> marker =
      BootRecorder::ParseMarkerLine(fake.Read("trace_marker"));
  ASSERT_TRUE(marker.has_value()) << fake.Read("trace_marker");
  EXPECT_EQ(marker->boot_id, kThisBoot);
  EXPECT_EQ(marker->machine, "node-7");
  EXPECT_GT(marker->boottime_ns, 0);
  EXPECT_GT(marker->realtime_ns, marker->boottime_ns);
  // Again, later: a fresh marker, whatever the ring overwrote meanwhile.
  fake.Write("trace_marker", "");
  ASSERT_TRUE(r->Mark());
  const std::optional<BootRecorder::Marker> again =
      BootRecorder::ParseMarkerLine(fake.Read("trace_marker"));
  ASSERT_TRUE(again.has_value());
  EXPECT_GE(again->boottime_ns, marker->boottime_ns);
  // The agent stops: tracing off, its own events disabled (no other), the
  // buffer kept.
  fake.Write("events/irq/irq_handler_entry/enable", "1\n");
  r.reset();
  EXPECT_EQ(fake.Read("tracing_on"), "0");
  EXPECT_EQ(fake.Read("events/sched/sched_switch/enable"), "0");
  EXPECT_EQ(fake.Read("events/printk/console/enable"), "0");
  EXPECT_EQ(fake.Read("events/irq/irq_handler_entry/enable"), "1\n");
}

TEST(BootRecorderTest, AKilledAgentsRecordingOfThisBootIsTakenOver) {
  FakeBootInstance fake;
  fake.HoldEvents(kThisBoot);
  fake.Write("tracing_on", "1\n");
  fake.Write("set_event", "sched:sched_switch\nprintk:console\n");
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r = BootRecorder::Start(fake.tracefs(), ThisBoot(), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  EXPECT_TRUE(report.resumed);
}

TEST(BootRecorderTest, ThisBootsEarlierEventsAreRecordedOnNotCleared) {
  FakeBootInstance fake;
  fake.HoldEvents(kThisBoot);
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r = BootRecorder::Start(fake.tracefs(), ThisBoot(), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  EXPECT_TRUE(report.resumed);
  EXPECT_TRUE(absl::StrContains(fake.Read("trace"), "Kernel panic")) << "cleared";
}

TEST(BootRecorderTest, AnEarlierBootsEventsAreLeftAsTheyAre) {
  FakeBootInstance fake;
  fake.HoldEvents(kEarlierBoot);
  BootRecorder::Report report;
  EXPECT_EQ(BootRecorder::Start(fake.tracefs(), ThisBoot(), &report), nullptr);
  EXPECT_EQ(report.state, State::kPreviousBoot);
  EXPECT_EQ(report.previous_boot_id, kEarlierBoot);
  EXPECT_EQ(fake.Read("tracing_on"), "0\n");
  EXPECT_EQ(fake.Read("trace_marker"), "");
  EXPECT_EQ(fake.Read("events/sched/sched_switch/enable"), "0\n");
}

// What take_previous_boot was handed.
struct Taken {
  int calls = 0;
  BootRecorder::Marker marker;
  uint64_t buffer_kb = 0;
  PreviousBootReader::Stats stats;
};
BootRecorder::Options TakingInto(Taken* taken, absl::Status result = absl::OkStatus()) {
  BootRecorder::Options options = ThisBoot();
  options.take_previous_boot = [taken, result](PreviousBootReader* reader,
                                               const BootRecorder::Marker& marker,
                                               uint64_t buffer_kb) {
    taken->calls++;
    taken->marker = marker;
    taken->buffer_kb = buffer_kb;
    testing::WriteAndReadBack([&](TraceWriter* w) { taken->stats = reader->ReadAll(w, nullptr); });
    return result;
  };
  return options;
}

TEST(BootRecorderTest, AnEarlierBootsEventsAreTakenThenThisBootIsRecorded) {
  FakeBootInstance fake;
  fake.HoldEvents(kEarlierBoot);
  fake.HoldPages(5);
  Taken taken;
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r =
      BootRecorder::Start(fake.tracefs(), TakingInto(&taken), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  ASSERT_EQ(taken.calls, 1);
  EXPECT_EQ(taken.marker.boot_id, kEarlierBoot);
  EXPECT_EQ(taken.marker.realtime_ns, 1764700000000000000);
  EXPECT_EQ(taken.buffer_kb, 12216u);
  EXPECT_EQ(taken.stats.events, 5u);
  EXPECT_EQ(report.state, State::kRecording);
  EXPECT_TRUE(report.previous_boot_taken);
  EXPECT_EQ(report.previous_boot_id, kEarlierBoot);
  EXPECT_TRUE(report.previous_boot_error.empty()) << report.previous_boot_error;
  EXPECT_FALSE(report.resumed);
  // Cleared, then recording this boot under its own marker.
  EXPECT_FALSE(absl::StrContains(fake.Read("trace"), "Kernel panic")) << "not cleared";
  EXPECT_EQ(fake.Read("tracing_on"), "1");
  const std::optional<BootRecorder::Marker> marker =
      BootRecorder::ParseMarkerLine(fake.Read("trace_marker"));
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->boot_id, kThisBoot);
  EXPECT_EQ(marker->kernel, ThisKernel());
}

TEST(BootRecorderTest, EventsThatCouldNotBeKeptAreSaidSoAndThisBootIsRecorded) {
  FakeBootInstance fake;
  fake.HoldEvents(kEarlierBoot);
  fake.HoldPages(2);
  Taken taken;
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r = BootRecorder::Start(
      fake.tracefs(), TakingInto(&taken, absl::ResourceExhaustedError("disk full")), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  EXPECT_EQ(taken.calls, 1);
  EXPECT_TRUE(report.previous_boot_taken);
  EXPECT_EQ(report.previous_boot_error, "disk full");
  EXPECT_EQ(report.state, State::kRecording);
}

// After a reboot into another kernel (an upgrade), the earlier boot's
// records could be misread with this kernel's formats: cleared unread, said
// so, and this boot recorded.
TEST(BootRecorderTest, AnotherKernelsEventsAreClearedUnreadAndThisBootRecorded) {
  FakeBootInstance fake;
  fake.HoldEvents(kEarlierBoot, "5.99.0-other");
  fake.HoldPages(2);
  Taken taken;
  BootRecorder::Report report;
  std::unique_ptr<BootRecorder> r =
      BootRecorder::Start(fake.tracefs(), TakingInto(&taken), &report);
  ASSERT_NE(r, nullptr) << report.detail;
  EXPECT_EQ(taken.calls, 0);
  EXPECT_EQ(report.state, State::kRecording);
  EXPECT_TRUE(report.previous_boot_taken);
  EXPECT_EQ(report.previous_boot_id, kEarlierBoot);
  EXPECT_TRUE(absl::StrContains(report.previous_boot_error, "kernel 5.99.0-other recorded them"))
      << report.previous_boot_error;
  EXPECT_FALSE(absl::StrContains(fake.Read("trace"), "Kernel panic")) << "not cleared";
  EXPECT_EQ(fake.Read("tracing_on"), "1");
}

TEST(BootRecorderTest, AnotherToolsEventsOrRecordingAreLeftAlone) {
  {
    FakeBootInstance fake;  // Events, none of them ringside's.
    fake.SetEntries(0, 5);
    fake.Write("trace", "  sh-1 [000] ..... 2.1: sched_switch: prev_comm=sh\n");
    std::string detail;
    EXPECT_EQ(LeftAloneAs(fake, &detail), State::kOtherTool);
    EXPECT_TRUE(absl::StrContains(detail, "another tool recorded")) << detail;
    EXPECT_EQ(fake.Read("trace_marker"), "");
  }
  {
    FakeBootInstance fake;  // Tracing on, an empty buffer: someone just started.
    fake.Write("tracing_on", "1\n");
    std::string detail;
    EXPECT_EQ(LeftAloneAs(fake, &detail), State::kOtherTool);
    EXPECT_TRUE(absl::StrContains(detail, "another tool set it up")) << detail;
    EXPECT_EQ(fake.Read("tracing_on"), "1\n");
  }
  {
    FakeBootInstance fake;  // Tracing on with an earlier boot's marker: not ours now.
    fake.HoldEvents(kEarlierBoot);
    fake.Write("tracing_on", "1\n");
    EXPECT_EQ(LeftAloneAs(fake), State::kOtherTool);
  }
  {
    // Events set from the kernel command line (trace_instance=NAME^...@trace,
    // sched) on a cold boot: an empty buffer, tracing off, but set up.
    FakeBootInstance fake;
    fake.Write("set_event", "sched:sched_switch\nsched:sched_wakeup\n");
    EXPECT_EQ(LeftAloneAs(fake), State::kOtherTool);
    EXPECT_EQ(fake.Read("trace_clock"),
              "local global counter uptime perf mono mono_raw [boot] x86-tsc\n");
  }
  {
    // This boot's marker, but another tool's events set since.
    FakeBootInstance fake;
    fake.HoldEvents(kThisBoot);
    fake.Write("set_event", "irq:irq_handler_entry\n");
    EXPECT_EQ(LeftAloneAs(fake), State::kOtherTool);
  }
  {
    // A tracer set: not an event recording at all.
    FakeBootInstance fake;
    fake.Write("current_tracer", "function\n");
    EXPECT_EQ(LeftAloneAs(fake), State::kOtherTool);
  }
}

TEST(BootRecorderTest, ABufferItCannotReadIsNotTakenForEmpty) {
  FakeBootInstance fake;
  unlink((fake.path() + "/per_cpu/cpu0/stats").c_str());
  EXPECT_EQ(LeftAloneAs(fake), State::kOtherTool);
  EXPECT_EQ(fake.Read("tracing_on"), "0\n");
}

TEST(BootRecorderTest, AnotherRingsideHoldingItIsLeftAlone) {
  FakeBootInstance fake;
  const base::ScopedFd held(open(fake.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(flock(held.get(), LOCK_EX | LOCK_NB), 0);
  BootRecorder::Report report;
  EXPECT_EQ(BootRecorder::Start(fake.tracefs(), ThisBoot(), &report), nullptr);
  EXPECT_EQ(report.state, State::kUnavailable);
  EXPECT_TRUE(absl::StrContains(report.detail, "another ringside")) << report.detail;
  EXPECT_EQ(fake.Read("tracing_on"), "0\n");
}

TEST(BootRecorderTest, NoInstanceOrAnOrdinaryOneSaysHowToGetOne) {
  testing::ScratchDir dir;
  BootRecorder::Report report;
  EXPECT_EQ(BootRecorder::Start(ftrace::Tracefs::AtRootForTesting(dir.path()), ThisBoot(), &report),
            nullptr);
  EXPECT_EQ(report.state, State::kUnavailable);
  EXPECT_TRUE(absl::StrContains(report.detail, "reserve_mem=12M:4096:trace")) << report.detail;
  EXPECT_TRUE(absl::StrContains(report.detail, "trace_instance=boot_mapped^traceoff@trace"))
      << report.detail;

  FakeBootInstance fake;
  unlink((fake.path() + "/last_boot_info").c_str());
  EXPECT_EQ(BootRecorder::Start(fake.tracefs(), ThisBoot(), &report), nullptr);
  EXPECT_EQ(report.state, State::kUnavailable);
  EXPECT_TRUE(absl::StrContains(report.detail, "not a persistent")) << report.detail;
  EXPECT_EQ(fake.Read("tracing_on"), "0\n");

  BootRecorder::Options off = ThisBoot();
  off.name = "";
  EXPECT_EQ(BootRecorder::Start(fake.tracefs(), off, &report), nullptr);
  EXPECT_EQ(report.state, State::kOff);
}

TEST(BootRecorderTest, MarkerLinesParseAndOthersDoNot) {
  const std::optional<BootRecorder::Marker> m = BootRecorder::ParseMarkerLine(
      "   <...>-1 [000] ..... 2.103861: tracing_mark_write: ringside-boot boot_id=abc "
      "kernel=6.12.57+deb13-amd64 boottime_ns=2103000000 realtime_ns=1764700000000000000 "
      "machine=rack 4 node 1\n");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->boot_id, "abc");
  EXPECT_EQ(m->kernel, "6.12.57+deb13-amd64");
  EXPECT_EQ(m->machine, "rack 4 node 1");
  EXPECT_EQ(m->boottime_ns, 2103000000);
  EXPECT_EQ(m->realtime_ns, 1764700000000000000);
  EXPECT_FALSE(BootRecorder::ParseMarkerLine("tracing_mark_write: ringside-boot boot_id=abc"));
  EXPECT_FALSE(
      BootRecorder::ParseMarkerLine("ringside-boot boot_id=abc boottime_ns=x realtime_ns=1"));
  EXPECT_FALSE(BootRecorder::ParseMarkerLine("console: msg=ringside"));
  // What MarkerText writes comes back whole, spaces in the name too.
  const BootRecorder::Marker written{"b-1", "6.1.0", "a b=c", 5, 6};
  const std::optional<BootRecorder::Marker> back =
      BootRecorder::ParseMarkerLine(BootRecorder::MarkerText(written));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->boot_id, "b-1");
  EXPECT_EQ(back->kernel, "6.1.0");
  EXPECT_EQ(back->machine, "a b=c");
  EXPECT_EQ(back->boottime_ns, 5);
  EXPECT_EQ(back->realtime_ns, 6);
}

}  // namespace
}  // namespace ringside::agent
