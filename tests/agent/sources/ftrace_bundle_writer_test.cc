#include "agent/sources/ftrace_bundle_writer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/buffer_reader.h"
#include "agent/session/service_packets.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "ftrace/cpu_reader.h"
#include "ftrace/event_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

using ftrace::EventTable;
using ftrace::RawEvent;

// A record laid out by hand: common fields, then the event's own.
class Record {
 public:
  Record(uint16_t id, int32_t common_pid, size_t size) : bytes_(size, 0) {
    std::memcpy(bytes_.data(), &id, 2);
    std::memcpy(bytes_.data() + 4, &common_pid, 4);
  }
  template <typename T>
  Record& Put(size_t offset, T value) {
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
    return *this;
  }
  Record& Str(size_t offset, const std::string& s) {
    std::memcpy(bytes_.data() + offset, s.data(), s.size());
    return *this;
  }
  RawEvent At(uint64_t ts) const {
    return RawEvent{ts, bytes_.data(), static_cast<uint32_t>(bytes_.size())};
  }

 private:
  std::vector<uint8_t> bytes_;
};

constexpr char kCommon[] =
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

EventTable SyntheticTable() {
  EventTable table;
  auto add = [&](const char* group, const char* name, int id, const char* fields) {
    const std::string text =
        absl::StrCat("name: ", name, "\nID: ", id, "\nformat:\n", kCommon, fields, "\n");
    absl::StatusOr<ftrace::EventFormat> f = ftrace::ParseEventFormat(group, text);
    EXPECT_TRUE(f.ok()) << f.status();
    table.Add(std::move(*f));
  };
  add("sched", "sched_switch", 10,
      "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
      "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
      "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
      "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
      "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
      "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
      "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n");
  add("sched", "sched_waking", 11,
      "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
      "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
      "\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
      "\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n");
  add("ftrace", "print", 12,
      "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
      "\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n");
  add("sched", "sched_process_exec", 13,
      "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n"
      "\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
      "\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n");
  add("irq", "softirq_entry", 14, "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n");
  for (auto [name, id] : {std::pair{"cpu_idle", 15}, std::pair{"cpu_frequency", 16}}) {
    add("power", name, id,
        "\tfield:u32 state;\toffset:8;\tsize:4;\tsigned:0;\n"
        "\tfield:u32 cpu_id;\toffset:12;\tsize:4;\tsigned:0;\n");
  }
  // As Linux 5.10 and 6.1 have them (mark_victim gained comm and more in 6.8).
  add("oom", "mark_victim", 17, "\tfield:int pid;\toffset:8;\tsize:4;\tsigned:1;\n");
  add("signal", "signal_deliver", 18,
      "\tfield:int sig;\toffset:8;\tsize:4;\tsigned:1;\n"
      "\tfield:int errno;\toffset:12;\tsize:4;\tsigned:1;\n"
      "\tfield:int code;\toffset:16;\tsize:4;\tsigned:1;\n"
      "\tfield:unsigned long sa_handler;\toffset:24;\tsize:8;\tsigned:0;\n"
      "\tfield:unsigned long sa_flags;\toffset:32;\tsize:8;\tsigned:0;\n");
  return table;
}

std::vector<trace::TracePacket> WriteAndReadBack(FtraceBundleWriter* w, uint32_t cpu,
                                                 const std::vector<RawEvent>& events, bool lost) {
  return testing::WriteAndReadBack(
      [&](TraceWriter* writer) { w->WriteBundle(writer, cpu, events, lost); });
}

TEST(FtraceBundleWriterTest, EncodesCompactSchedTypedAndGenericEvents) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, {});
  const Record sw1 = Record(10, 100, 64)
                         .Str(8, "bash")
                         .Put<int32_t>(24, 100)
                         .Put<int64_t>(32, 1)
                         .Str(40, "kworker/0:1")
                         .Put<int32_t>(56, 7)
                         .Put<int32_t>(60, 120);
  const Record sw2 = Record(10, 7, 64)
                         .Str(8, "kworker/0:1")
                         .Put<int32_t>(24, 7)
                         .Str(40, "bash")
                         .Put<int32_t>(56, 100)
                         .Put<int32_t>(60, 110);
  const Record wake =
      Record(11, 7, 36).Str(8, "bash").Put<int32_t>(24, 100).Put<int32_t>(28, 120).Put<int32_t>(32,
                                                                                                1);
  const std::string text = "hello from userspace\n";
  const Record print = Record(12, 55, 16 + text.size() + 1).Put<uint64_t>(8, 0xdead).Str(16, text);
  // __data_loc: length 10 << 16 | offset 20.
  const Record exec = Record(13, 55, 30)
                          .Put<uint32_t>(8, 10u << 16 | 20)
                          .Put<int32_t>(12, 55)
                          .Put<int32_t>(16, 55)
                          .Str(20, "/bin/true");
  const Record softirq = Record(14, 0, 12).Put<uint32_t>(8, 3);
  const Record unknown = Record(99, 0, 8);
  const std::vector<RawEvent> events = {sw1.At(1000),    wake.At(1500), print.At(1600),
                                        sw2.At(2000),    exec.At(2100), softirq.At(2200),
                                        unknown.At(2300)};

  std::vector<trace::TracePacket> packets = WriteAndReadBack(&w, 1, events, /*lost=*/true);
  ASSERT_EQ(packets.size(), 1u);
  const trace::FtraceEventBundle& b = packets[0].ftrace_events();
  EXPECT_EQ(b.cpu(), 1u);
  EXPECT_TRUE(b.lost_events());

  const auto& cs = b.compact_sched();
  ASSERT_EQ(cs.switch_timestamp_size(), 2);
  EXPECT_EQ(cs.switch_timestamp(0), 1000u);  // Absolute, then deltas.
  EXPECT_EQ(cs.switch_timestamp(1), 1000u);
  EXPECT_EQ(cs.switch_next_pid(0), 7);
  EXPECT_EQ(cs.switch_next_pid(1), 100);
  EXPECT_EQ(cs.switch_next_prio(1), 110);
  EXPECT_EQ(cs.switch_prev_state(0), 1);
  EXPECT_EQ(cs.intern_table(cs.switch_next_comm_index(0)), "kworker/0:1");
  EXPECT_EQ(cs.intern_table(cs.switch_next_comm_index(1)), "bash");
  ASSERT_EQ(cs.waking_timestamp_size(), 1);
  EXPECT_EQ(cs.waking_timestamp(0), 1500u);
  EXPECT_EQ(cs.waking_pid(0), 100);
  EXPECT_EQ(cs.waking_target_cpu(0), 1);
  EXPECT_EQ(cs.intern_table(cs.waking_comm_index(0)), "bash");
  EXPECT_EQ(cs.intern_table_size(), 2);  // Comms are interned once per bundle.

  ASSERT_EQ(b.event_size(), 3);
  EXPECT_EQ(b.event(0).timestamp(), 1600u);
  EXPECT_EQ(b.event(0).pid(), 55u);
  EXPECT_EQ(b.event(0).print().buf(), text);
  EXPECT_EQ(b.event(0).print().ip(), 0xdeadu);
  EXPECT_EQ(b.event(1).sched_process_exec().filename(), "/bin/true");
  EXPECT_EQ(b.event(1).sched_process_exec().pid(), 55);
  ASSERT_TRUE(b.event(2).has_generic());
  EXPECT_EQ(b.event(2).generic().event_name(), "softirq_entry");
  ASSERT_EQ(b.event(2).generic().field_size(), 1);
  EXPECT_EQ(b.event(2).generic().field(0).name(), "vec");
  EXPECT_EQ(b.event(2).generic().field(0).uint_value(), 3u);

  EXPECT_EQ(w.stats().unknown_events, 1u);
  EXPECT_EQ(w.stats().compact_events, 3u);
  EXPECT_EQ(w.stats().generic_events, 1u);
}

// Perfetto's importer makes each CPU's cpuidle and cpufreq counter tracks
// from the typed messages only; a generic event stays in its raw table.
TEST(FtraceBundleWriterTest, PowerEventsAreTheTypedMessagesPerfettoMakesCountersOf) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, {});
  const Record idle_exit = Record(15, 0, 16).Put<uint32_t>(8, 4294967295u).Put<uint32_t>(12, 1);
  const Record idle_enter = Record(15, 0, 16).Put<uint32_t>(8, 2).Put<uint32_t>(12, 1);
  const Record freq = Record(16, 0, 16).Put<uint32_t>(8, 2400000).Put<uint32_t>(12, 1);
  std::vector<trace::TracePacket> packets = WriteAndReadBack(
      &w, 1, {idle_exit.At(1000), freq.At(1100), idle_enter.At(1200)}, /*lost=*/false);
  ASSERT_EQ(packets.size(), 1u);
  const trace::FtraceEventBundle& b = packets[0].ftrace_events();
  ASSERT_EQ(b.event_size(), 3);
  ASSERT_TRUE(b.event(0).has_cpu_idle());
  EXPECT_EQ(b.event(0).timestamp(), 1000u);
  EXPECT_EQ(b.event(0).cpu_idle().state(), 4294967295u);
  EXPECT_EQ(b.event(0).cpu_idle().cpu_id(), 1u);
  ASSERT_TRUE(b.event(1).has_cpu_frequency());
  EXPECT_EQ(b.event(1).cpu_frequency().state(), 2400000u);
  EXPECT_EQ(b.event(1).cpu_frequency().cpu_id(), 1u);
  ASSERT_TRUE(b.event(2).has_cpu_idle());
  EXPECT_EQ(b.event(2).cpu_idle().state(), 2u);
  EXPECT_EQ(w.stats().generic_events, 0u);
  std::map<std::string, uint64_t> tallied;
  for (const DataSource::EventTally& t : w.EventTallies()) tallied[t.kind] += t.committed;
  EXPECT_EQ(tallied["cpu_idle"], 2u);
  EXPECT_EQ(tallied["cpu_frequency"], 1u);
}

// The writer finds each event id's format and plan once and keeps them by
// id: ids in any order still get their own messages, and an id the table
// lacks (a small one, or one no kernel numbers, from a malformed record) is
// counted unknown each time it comes, not taken for another's.
TEST(FtraceBundleWriterTest, EachIdKeepsItsOwnFormatAndUnknownIdsStayUnknown) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, {});
  const Record idle = Record(15, 0, 16).Put<uint32_t>(8, 2).Put<uint32_t>(12, 1);
  const Record freq = Record(16, 0, 16).Put<uint32_t>(8, 2400000).Put<uint32_t>(12, 1);
  const Record unknown_small = Record(999, 0, 16);
  const Record unknown_large = Record(65535, 0, 16);
  std::vector<trace::TracePacket> packets = WriteAndReadBack(
      &w, 0,
      {unknown_large.At(900), idle.At(1000), unknown_small.At(1050), freq.At(1100),
       unknown_large.At(1150), idle.At(1200), unknown_small.At(1250), freq.At(1300)},
      /*lost=*/false);
  ASSERT_EQ(packets.size(), 1u);
  const trace::FtraceEventBundle& b = packets[0].ftrace_events();
  ASSERT_EQ(b.event_size(), 4);
  for (int i : {0, 2}) EXPECT_TRUE(b.event(i).has_cpu_idle()) << i;
  for (int i : {1, 3}) EXPECT_EQ(b.event(i).cpu_frequency().state(), 2400000u) << i;
  EXPECT_EQ(w.stats().unknown_events, 4u);
  EXPECT_EQ(w.stats().generic_events, 0u);
}

// What ftrace reports in place of BPF's incident programs: an OOM kill's
// victim, and a signal its task takes with the default action of a signal
// that ends the process; not one it catches, nor one whose default is
// harmless.
TEST(FtraceBundleWriterTest, IncidentsAreOomVictimsAndFatalSignalsTakenWithTheDefaultAction) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, FtraceBundleWriter::Options{.incidents = true});
  const Record oom = Record(17, 55, 16).Put<int32_t>(8, 4242);
  auto deliver = [](int32_t pid, int32_t sig, uint64_t handler) {
    return Record(18, pid, 40).Put<int32_t>(8, sig).Put<uint64_t>(24, handler);
  };
  const Record segv = deliver(700, 11, 0);
  const Record caught_segv = deliver(701, 11, 0x401000);
  const Record term = deliver(702, 15, 0);
  const Record kill = deliver(703, 9, 0);
  std::vector<trace::TracePacket> packets = WriteAndReadBack(
      &w, 0, {oom.At(10), segv.At(20), caught_segv.At(30), term.At(40), kill.At(50)},
      /*lost=*/false);
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_EQ(packets[0].ftrace_events().event(0).mark_victim().pid(), 4242);  // Typed.
  const std::vector<Incident> incidents = w.TakeIncidents();
  ASSERT_EQ(incidents.size(), 3u);
  EXPECT_EQ(incidents[0].kind, Incident::Kind::kOomKill);
  EXPECT_EQ(incidents[0].pid, 4242);
  EXPECT_EQ(incidents[0].boottime_ns, 10);
  EXPECT_EQ(incidents[1].kind, Incident::Kind::kFatalSignal);
  EXPECT_EQ(incidents[1].pid, 700);
  EXPECT_EQ(incidents[1].signal, 11);
  EXPECT_EQ(incidents[2].pid, 703);
  EXPECT_EQ(incidents[2].signal, 9);
  EXPECT_TRUE(w.TakeIncidents().empty());
  // Not asked for: none collected.
  FtraceBundleWriter quiet(&table, {});
  WriteAndReadBack(&quiet, 0, {oom.At(10), segv.At(20)}, false);
  EXPECT_TRUE(quiet.TakeIncidents().empty());
}

TEST(FtraceBundleWriterTest, WithoutCompactSchedSwitchesAreTypedEvents) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, FtraceBundleWriter::Options{.compact_sched = false});
  const Record sw = Record(10, 100, 64)
                        .Str(8, "bash")
                        .Put<int32_t>(24, 100)
                        .Put<int64_t>(32, -1)
                        .Str(40, "idle")
                        .Put<int32_t>(56, 0);
  std::vector<trace::TracePacket> packets = WriteAndReadBack(&w, 0, {sw.At(5)}, false);
  ASSERT_EQ(packets.size(), 1u);
  const auto& e = packets[0].ftrace_events().event(0);
  EXPECT_EQ(e.sched_switch().prev_comm(), "bash");
  EXPECT_EQ(e.sched_switch().prev_state(), -1);
  EXPECT_EQ(e.sched_switch().next_comm(), "idle");
  EXPECT_FALSE(packets[0].ftrace_events().has_lost_events());
}

// A task that was exiting when recording began has no exit in the file;
// its last switch (prev_state X or Z) names it, and only such a switch.
TEST(FtraceBundleWriterTest, ADeadTasksLastSwitchNamesIt) {
  const EventTable table = SyntheticTable();
  DescriptorTracker tracker;
  FtraceBundleWriter w(&table, FtraceBundleWriter::Options{.tracker = &tracker});
  auto leaving = [](int32_t pid, const std::string& comm, int64_t state) {
    return Record(10, pid, 64)
        .Str(8, comm)
        .Put<int32_t>(24, pid)
        .Put<int64_t>(32, state)
        .Str(40, "swapper/0")
        .Put<int32_t>(56, 0);
  };
  const Record dead = leaving(90, "dying", 0x10), zombie = leaving(91, "zombie", 0x20),
               asleep = leaving(92, "asleep", 0x1), preempted = leaving(93, "busy", 0x100);
  WriteAndReadBack(&w, 0, {dead.At(1), zombie.At(2), asleep.At(3), preempted.At(4)}, false);
  EXPECT_EQ(testing::ThreadNames(&tracker),
            (std::map<int32_t, std::string>{{90, "dying"}, {91, "zombie"}}));
}

TEST(FtraceBundleWriterTest, TruncatedRecordsReadAsEmptyFieldsNotPastTheEnd) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, FtraceBundleWriter::Options{.compact_sched = false});
  // A sched_switch record cut after its common fields, and a __data_loc
  // pointing past the record.
  const Record short_switch = Record(10, 1, 8);
  const Record bad_loc = Record(13, 1, 20).Put<uint32_t>(8, 200u << 16 | 4);
  std::vector<trace::TracePacket> packets =
      WriteAndReadBack(&w, 0, {short_switch.At(1), bad_loc.At(2)}, false);
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_EQ(packets[0].ftrace_events().event(0).sched_switch().next_comm(), "");
  EXPECT_EQ(packets[0].ftrace_events().event(1).sched_process_exec().filename(), "");
}

// The tally, against what a reader of the buffer counts (CountEventsByKind,
// as the session does for ringside_event_loss) and against the events
// written by hand: compact rows count one each, typed events by their
// message, every generic event under "generic", unknown ids not at all; a
// bundle whose packet found the chunk pool empty counts as pool_dropped.
TEST(FtraceBundleWriterTest, TalliesEventsAsAReaderCountsThemAndThoseOfADroppedPacket) {
  const EventTable table = SyntheticTable();
  FtraceBundleWriter w(&table, FtraceBundleWriter::Options{.num_cpus = 2});
  // Two chunks: one for each CPU's writer, none to spare until committed.
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{.num_chunks = 2});
  auto cpu0 = producer.CreateTraceWriter(1);
  auto cpu1 = producer.CreateTraceWriter(2);
  auto tb = buffer::TraceBuffer::Create(1 << 20);

  const Record sw = Record(10, 100, 64).Str(8, "bash").Str(40, "kworker/0:1").Put<int32_t>(56, 7);
  const Record wake = Record(11, 7, 36).Str(8, "bash").Put<int32_t>(24, 100);
  const Record print = Record(12, 55, 24).Str(16, "mark");
  const Record exec = Record(13, 55, 20);
  const Record softirq = Record(14, 0, 12).Put<uint32_t>(8, 3);
  const Record unknown = Record(99, 0, 8);

  // CPU 0, committed: 3 switches and 2 wakings (compact), a print, an exec,
  // a generic softirq_entry, an unknown id.
  std::vector<RawEvent> small;
  uint64_t ts = 1000;
  for (const Record* r : {&sw, &wake, &sw, &print, &exec, &wake, &softirq, &unknown, &sw}) {
    small.push_back(r->At(ts++));
  }
  EXPECT_TRUE(w.WriteBundle(cpu0.get(), 0, small, false));

  // CPU 1: a bundle larger than the chunk its writer holds, with no chunk
  // left in the pool: dropped whole, its first fragment already committed.
  std::vector<RawEvent> large;
  for (int i = 0; i < 600; i++) large.push_back(sw.At(ts++));
  for (int i = 0; i < 200; i++) large.push_back(softirq.At(ts++));
  large.push_back(exec.At(ts++));
  EXPECT_FALSE(w.WriteBundle(cpu1.get(), 1, large, false));
  EXPECT_GT(producer.CommitQueuedInto(tb.get()), 0u);  // Chunks back in the pool.

  // CPU 1 again, with chunks to write into: committed.
  std::vector<RawEvent> after = {sw.At(ts++), softirq.At(ts++), softirq.At(ts++), wake.At(ts++)};
  EXPECT_TRUE(w.WriteBundle(cpu1.get(), 1, after, true));
  cpu0->Flush();
  cpu1->Flush();
  producer.CommitQueuedInto(tb.get());

  using trace::FtraceEvent;
  struct Expected {
    uint32_t cpu;
    uint32_t field;
    const char* kind;
    uint64_t committed, pool_dropped;
  };
  const std::vector<Expected> expected = {
      {0, FtraceEvent::kPrintFieldNumber, "print", 1, 0},
      {0, FtraceEvent::kSchedSwitchFieldNumber, "sched_switch", 3, 0},
      {0, FtraceEvent::kSchedWakingFieldNumber, "sched_waking", 2, 0},
      {0, FtraceEvent::kSchedProcessExecFieldNumber, "sched_process_exec", 1, 0},
      {0, FtraceEvent::kGenericFieldNumber, "generic", 1, 0},
      {1, FtraceEvent::kSchedSwitchFieldNumber, "sched_switch", 1, 600},
      {1, FtraceEvent::kSchedWakingFieldNumber, "sched_waking", 1, 0},
      {1, FtraceEvent::kSchedProcessExecFieldNumber, "sched_process_exec", 0, 1},
      {1, FtraceEvent::kGenericFieldNumber, "generic", 2, 200},
  };
  const std::vector<DataSource::EventTally> tallies = w.EventTallies();
  ASSERT_EQ(tallies.size(), expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    const DataSource::EventTally& t = tallies[i];
    const Expected& e = expected[i];
    EXPECT_EQ(t.cpu, e.cpu) << i;
    EXPECT_EQ(t.field, e.field) << i;
    EXPECT_EQ(t.kind, e.kind) << i;
    EXPECT_EQ(t.committed, e.committed) << e.kind << " on CPU " << e.cpu;
    EXPECT_EQ(t.pool_dropped, e.pool_dropped) << e.kind << " on CPU " << e.cpu;
  }
  EXPECT_EQ(w.stats().unknown_events, 1u);

  // What the buffer gives back is what the tally says was committed, and
  // the session's losses are the dropped packet's events, nothing more.
  BufferPacketReader reader;
  std::string out;
  reader.ReadInto({tb.get()}, &out);
  for (const DataSource::EventTally& t : tallies) {
    EXPECT_EQ(reader.events_of(1, t.cpu, t.field), t.committed) << t.kind << " on CPU " << t.cpu;
  }
  SourceStats source{"linux.ftrace", {}, {}, 1, tallies, {}, {}, {}};
  const std::vector<EventLoss> losses = EventLosses({source}, reader);
  ASSERT_EQ(losses.size(), 3u);
  for (const EventLoss& l : losses) {
    EXPECT_EQ(l.stage, "chunk_pool");
    EXPECT_EQ(l.cpu, 1u);
    EXPECT_EQ(l.events, l.kind == "sched_switch" ? 600u
                        : l.kind == "generic"    ? 200u
                                                 : 1u)
        << l.kind;
  }
}

// --- Against the real kernel ---------------------------------------------------

TEST(FtraceEndToEndTest, EventsOfARealWorkloadBecomeBundlesAndCountsMatchTheKernel) {
  RINGSIDE_REQUIRE_TRACEFS();
  const ftrace::Tracefs& tracefs = *ftrace::testing::KernelTracefs();
  auto instance = ftrace::Instance::Create(tracefs, "t-e2e");
  ASSERT_TRUE(instance.ok()) << instance.status();
  ASSERT_TRUE((*instance)->SetBufferSizeKb(4096).ok());
  ASSERT_TRUE((*instance)->SetTraceClock("boot").ok());
  const std::vector<std::string> wanted = {"sched/sched_switch", "sched/sched_waking",
                                           "sched/sched_process_exec", "task/task_newtask",
                                           "sched/sched_stat_runtime"};
  std::vector<ftrace::Instance::EventSpec> specs;
  for (const std::string& e : wanted) specs.push_back({e, ""});
  ftrace::Instance::EnableResult enabled = (*instance)->EnableEvents(specs);
  ASSERT_GE(enabled.enabled.size(), 4u);
  std::vector<std::string> formats = enabled.enabled;
  formats.push_back("ftrace/print");
  absl::StatusOr<EventTable> table = EventTable::Load(tracefs, formats);
  ASSERT_TRUE(table.ok()) << table.status();
  auto page_format = ftrace::ParseHeaderPage(*tracefs.Read("events/header_page"));
  auto event_format = ftrace::ParseHeaderEvent(*tracefs.Read("events/header_event"));
  ASSERT_TRUE(page_format.ok() && event_format.ok());

  // Only this process and the children it forks (the workload): the rest
  // of a busy machine overran the instance's buffers (273,346 events beside
  // a hackbench), and the test checks that nothing was lost.
  const std::string dir = (*instance)->relative_path();
  ASSERT_TRUE(tracefs.Write(dir + "/options/event-fork", "1").ok());
  ASSERT_TRUE(tracefs.Write(dir + "/set_event_pid", std::to_string(getpid())).ok());
  // The workload: 20 short processes and 20 markers.
  ASSERT_TRUE((*instance)->SetTracingOn(true).ok());
  std::set<int32_t> children;
  for (int i = 0; i < 20; i++) {
    const pid_t child = fork();
    if (child == 0) {
      execl("/bin/true", "true", nullptr);
      _exit(127);
    }
    children.insert(child);
    waitpid(child, nullptr, 0);
  }
  ASSERT_TRUE(tracefs.Write((*instance)->relative_path() + "/trace_marker", "e2e marker").ok());
  ASSERT_TRUE((*instance)->SetTracingOn(false).ok());

  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_CONF));
  ftrace::PageParser parser(*page_format, *event_format);
  FtraceBundleWriter bundles(&*table, {});
  auto tb = buffer::TraceBuffer::Create(32 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  auto writer = producer.CreateTraceWriter(1);
  std::map<uint32_t, uint64_t> raw_by_id;
  uint64_t raw_total = 0;
  for (int cpu = 0; cpu < cpus; cpu++) {
    auto reader = ftrace::CpuReader::Open(**instance, cpu, page_format->page_size());
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::vector<uint8_t> pages;
    absl::StatusOr<size_t> n = (*reader)->ReadPages(100000, &pages);
    ASSERT_TRUE(n.ok()) << n.status();
    for (size_t p = 0; p < *n; p++) {
      std::vector<RawEvent> events;
      auto r = parser.Parse(pages.data() + p * page_format->page_size(), page_format->page_size(),
                            &events);
      ASSERT_EQ(r.error, ftrace::PageParser::Error::kNone);
      for (const RawEvent& e : events) raw_by_id[EventTable::EventId(e)]++;
      raw_total += events.size();
      bundles.WriteBundle(writer.get(), static_cast<uint32_t>(cpu), events, r.lost_events);
      producer.CommitQueuedInto(tb.get());
    }
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());

  // The kernel's own count of what was read matches ours, and nothing was lost.
  uint64_t kernel_read = 0;
  for (int cpu = 0; cpu < cpus; cpu++) {
    absl::StatusOr<ftrace::Instance::CpuStats> s = (*instance)->ReadCpuStats(cpu);
    ASSERT_TRUE(s.ok());
    kernel_read += s->read_events;
    EXPECT_EQ(s->overrun, 0u);
  }
  EXPECT_EQ(raw_total, kernel_read);

  uint64_t switches = 0, execs = 0, prints = 0, generic = 0;
  for (const testing::ReadPacket& r : testing::ReadAllPackets(tb.get())) {
    const trace::TracePacket& p = r.packet;
    const auto& cs = p.ftrace_events().compact_sched();
    switches += static_cast<uint64_t>(cs.switch_timestamp_size());
    for (int i = 0; i < cs.switch_next_pid_size(); i++) EXPECT_GE(cs.switch_next_pid(i), 0);
    for (const auto& e : p.ftrace_events().event()) {
      // Only ours: the instance sees every exec of the machine.
      if (e.has_sched_process_exec() && children.count(e.sched_process_exec().pid())) {
        execs++;
        EXPECT_EQ(e.sched_process_exec().filename(), "/bin/true");
      }
      if (e.has_print() && e.print().buf().find("e2e marker") == 0) prints++;
      if (e.has_generic()) generic++;
    }
  }
  const uint32_t switch_id = [&] {
    for (uint32_t id = 1; id < 65536; id++) {
      const EventTable::Entry* entry = table->Find(id);
      if (entry && entry->format.name == "sched_switch") return id;
    }
    return 0u;
  }();
  EXPECT_GT(switches, 20u);
  EXPECT_EQ(switches, raw_by_id[switch_id]);
  EXPECT_EQ(execs, 20u);
  EXPECT_EQ(prints, 1u);
  EXPECT_EQ(bundles.stats().unknown_events, 0u);
  if (enabled.enabled.size() == 5) {
    EXPECT_GT(generic, 0u);  // sched_stat_runtime.
  }
}

}  // namespace
}  // namespace ringside::agent
