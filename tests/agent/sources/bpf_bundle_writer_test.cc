#include "agent/sources/bpf_bundle_writer.h"

#include <cstring>
#include <string>
#include <vector>

#include "bpf/event_types.h"
#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/sched_events.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"

namespace ringside::agent {
namespace {

// Records laid out as the rings hold them, kept alive for the views.
class Records {
 public:
  template <typename T>
  T& Add(uint16_t type, uint64_t ts) {
    storage_.emplace_back(sizeof(T), 0);
    T* t = reinterpret_cast<T*>(storage_.back().data());
    t->h.type = type;
    t->h.size = sizeof(T);
    t->h.ts_ns = ts;
    return *t;
  }
  void AddRaw(std::vector<uint8_t> bytes) { storage_.push_back(std::move(bytes)); }
  std::vector<bpf::RecordView> Views() const {
    std::vector<bpf::RecordView> v;
    for (const auto& s : storage_) v.push_back({s.data(), static_cast<uint32_t>(s.size())});
    return v;
  }

 private:
  std::vector<std::vector<uint8_t>> storage_;
};

trace::FtraceEventBundle WriteAndReadBack(BpfBundleWriter* w, const Records& records, bool lost) {
  const std::vector<bpf::RecordView> views = records.Views();
  const std::vector<trace::TracePacket> packets = testing::WriteAndReadBack(
      [&](TraceWriter* writer) { w->WriteBundle(writer, 1, views, lost); });
  EXPECT_EQ(packets.size(), 1u);
  return packets.empty() ? trace::FtraceEventBundle() : packets[0].ftrace_events();
}

// Each row of bpf::kEventTypes names an FtraceEvent field that exists
// (found in the generated descriptor), and the numbers are Perfetto's.
TEST(BpfBundleWriterTest, EveryEventTypeHasItsPerfettoField) {
  for (const bpf::EventType& e : bpf::kEventTypes) {
    // Stack samples are a TracePacket field, not an FtraceEvent.
    if (e.type == RS_EV_STACK_BLOCKED || e.type == RS_EV_STACK_CPU_SAMPLE) continue;
    EXPECT_NE(BpfBundleWriter::FieldOf(e.type), 0u) << e.name << ": " << e.perfetto_event;
  }
  EXPECT_EQ(BpfBundleWriter::FieldOf(RS_EV_SCHED_SWITCH),
            uint32_t{trace::FtraceEvent::kSchedSwitchFieldNumber});
  EXPECT_EQ(BpfBundleWriter::FieldOf(RS_EV_TASK_RENAME),
            uint32_t{trace::FtraceEvent::kTaskRenameFieldNumber});
  EXPECT_EQ(BpfBundleWriter::FieldOf(RS_EV_CORE_DUMP),
            uint32_t{trace::FtraceEvent::kGenericFieldNumber});
  EXPECT_EQ(BpfBundleWriter::FieldOf(RS_EV_SCHED_BATCH), 0u);
}

TEST(BpfBundleWriterTest, EncodesEveryRecordTypeAsPerfettoReadsIt) {
  Records r;
  auto& sw1 = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, 1000);
  sw1.prev_pid = 100;
  sw1.next_pid = 7;
  sw1.next_prio = 120;
  sw1.prev_state = 1;
  std::strcpy(sw1.next_comm, "kworker/1:1");
  auto& wake = r.Add<rs_sched_wakeup>(RS_EV_SCHED_WAKING, 1500);
  wake.pid = 100;
  wake.waker_pid = 7;
  wake.target_cpu = 1;
  wake.prio = 120;
  std::strcpy(wake.comm, "bash");
  auto& sw2 = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, 2000);
  sw2.next_pid = 100;
  sw2.next_prio = 110;
  std::strcpy(sw2.next_comm, "bash");
  auto& fork = r.Add<rs_process_fork>(RS_EV_PROCESS_FORK, 2100);
  fork.parent_pid = fork.parent_tgid = 100;
  fork.child_pid = fork.child_tgid = 101;
  std::strcpy(fork.child_comm, "bash");
  auto& exec = r.Add<rs_process_exec>(RS_EV_PROCESS_EXEC, 2200);
  exec.pid = exec.tgid = exec.old_pid = 101;
  exec.ppid = 100;
  exec.uid = 1000;
  std::strcpy(exec.filename, "/bin/true");
  exec.filename_len = 9;
  std::memcpy(exec.argv, "true\0-x\0", 8);
  exec.argv_len = 8;
  auto& exit = r.Add<rs_process_exit>(RS_EV_PROCESS_EXIT, 2300);
  exit.pid = exit.tgid = 101;
  exit.exit_code = 139;
  exit.group_dead = 1;
  auto& sig = r.Add<rs_fatal_signal>(RS_EV_FATAL_SIGNAL, 2400);
  sig.sig = 11;
  sig.sender_pid = sig.target_pid = 101;
  auto& oom = r.Add<rs_oom_kill>(RS_EV_OOM_KILL, 2500);
  oom.pid = 202;
  oom.killer_pid = 7;
  auto& core = r.Add<rs_core_dump>(RS_EV_CORE_DUMP, 2600);
  core.pid = core.tgid = 101;
  core.sig = 11;
  std::strcpy(core.comm, "crasher");
  // Malformed: a switch header claiming more bytes than the record has,
  // and an unknown type. Both are counted and skipped.
  std::vector<uint8_t> bad(sizeof(rs_event_header), 0);
  rs_event_header h{RS_EV_SCHED_SWITCH, sizeof(rs_sched_switch), 0, 3000};
  std::memcpy(bad.data(), &h, sizeof(h));
  r.AddRaw(bad);
  h = rs_event_header{RS_EV_MAX + 3, sizeof(rs_event_header), 0, 3100};
  std::memcpy(bad.data(), &h, sizeof(h));
  r.AddRaw(bad);

  BpfBundleWriter w;
  const trace::FtraceEventBundle b = WriteAndReadBack(&w, r, /*lost=*/true);
  EXPECT_EQ(b.cpu(), 1u);
  EXPECT_TRUE(b.lost_events());
  const auto& cs = b.compact_sched();
  ASSERT_EQ(cs.switch_timestamp_size(), 2);
  EXPECT_EQ(cs.switch_timestamp(0), 1000u);  // Absolute, then deltas.
  EXPECT_EQ(cs.switch_timestamp(1), 1000u);
  EXPECT_EQ(cs.switch_next_pid(0), 7);
  EXPECT_EQ(cs.switch_next_pid(1), 100);
  EXPECT_EQ(cs.switch_prev_state(0), 1);
  EXPECT_EQ(cs.switch_next_prio(1), 110);
  EXPECT_EQ(cs.intern_table(static_cast<int>(cs.switch_next_comm_index(0))), "kworker/1:1");
  EXPECT_EQ(cs.intern_table(static_cast<int>(cs.switch_next_comm_index(1))), "bash");

  // sched_waking in compact form too, as Perfetto reads it to give the
  // wakee its runnable state and its waker (whoever runs on the CPU then).
  ASSERT_EQ(cs.waking_timestamp_size(), 1);
  EXPECT_EQ(cs.waking_timestamp(0), 1500u);
  EXPECT_EQ(cs.waking_pid(0), 100);
  EXPECT_EQ(cs.waking_target_cpu(0), 1);
  EXPECT_EQ(cs.waking_prio(0), 120);
  EXPECT_EQ(cs.intern_table(static_cast<int>(cs.waking_comm_index(0))), "bash");

  ASSERT_EQ(b.event_size(), 6);
  EXPECT_EQ(b.event(0).sched_process_fork().child_pid(), 101);
  EXPECT_EQ(b.event(0).sched_process_fork().parent_tgid(), 100);
  const auto& x = b.event(1).sched_process_exec();
  EXPECT_EQ(x.filename(), "/bin/true");
  EXPECT_EQ(x.argv(), std::string("true\0-x\0", 8));
  EXPECT_EQ(x.uid(), 1000u);
  EXPECT_EQ(x.ppid(), 100);
  EXPECT_EQ(b.event(2).sched_process_exit().exit_code(), 139);
  EXPECT_TRUE(b.event(2).sched_process_exit().group_dead());
  EXPECT_EQ(b.event(3).signal_generate().sig(), 11);
  EXPECT_EQ(b.event(3).signal_generate().pid(), 101);
  EXPECT_EQ(b.event(4).mark_victim().pid(), 202);
  EXPECT_EQ(b.event(4).pid(), 7u);
  EXPECT_EQ(b.event(5).generic().event_name(), "ringside_core_dump");
  EXPECT_EQ(b.event(5).generic().field(2).int_value(), 11);
  EXPECT_EQ(b.event(5).generic().field(3).str_value(), "crasher");

  EXPECT_EQ(w.stats().malformed, 2u);
  EXPECT_EQ(w.stats().events[RS_EV_SCHED_SWITCH], 2u);
  EXPECT_EQ(w.total_events(), 9u);
}

// Every typed event with every field it writes, and the FtraceEvent's pid
// (the task that ran), one record of each type in the order written.
TEST(BpfBundleWriterTest, EncodesEveryFieldOfEachTypedEvent) {
  Records r;
  auto& wake = r.Add<rs_sched_wakeup>(RS_EV_SCHED_WAKEUP_NEW, 100);
  wake.pid = 11;
  wake.waker_pid = 12;
  wake.prio = 120;
  wake.target_cpu = 3;
  std::strcpy(wake.comm, "newborn");
  auto& mig = r.Add<rs_sched_migrate>(RS_EV_SCHED_MIGRATE, 200);
  mig.pid = 21;
  mig.prio = 110;
  mig.orig_cpu = 2;
  mig.dest_cpu = 5;
  std::strcpy(mig.comm, "mover");
  auto& fork = r.Add<rs_process_fork>(RS_EV_PROCESS_FORK, 300);
  fork.parent_pid = 31;
  fork.parent_tgid = 30;
  fork.child_pid = 32;
  fork.child_tgid = 33;
  std::strcpy(fork.parent_comm, "parent");
  std::strcpy(fork.child_comm, "child");
  auto& exec = r.Add<rs_process_exec>(RS_EV_PROCESS_EXEC, 400);
  exec.pid = 41;
  exec.tgid = 40;
  exec.old_pid = 42;
  exec.ppid = 43;
  exec.uid = 1001;
  std::strcpy(exec.filename, "/usr/bin/env");
  exec.filename_len = 12;
  std::memcpy(exec.argv, "env\0-i\0", 7);
  exec.argv_len = 7;
  auto& exit = r.Add<rs_process_exit>(RS_EV_PROCESS_EXIT, 500);
  exit.pid = 51;
  exit.tgid = 50;
  exit.exit_code = 2;
  exit.group_dead = 0;
  std::strcpy(exit.comm, "leaver");
  auto& rename = r.Add<rs_task_rename>(RS_EV_TASK_RENAME, 600);
  rename.pid = 61;
  std::strcpy(rename.old_comm, "before");
  std::strcpy(rename.new_comm, "after");
  auto& free = r.Add<rs_process_free>(RS_EV_PROCESS_FREE, 700);
  free.pid = 71;
  free.prio = 130;
  free.current_pid = 72;
  std::strcpy(free.comm, "freed");
  auto& sig = r.Add<rs_fatal_signal>(RS_EV_FATAL_SIGNAL, 800);
  sig.sig = 9;
  sig.si_code = -6;
  sig.sender_pid = 81;
  sig.target_pid = 82;
  std::strcpy(sig.target_comm, "victim");
  auto& oom = r.Add<rs_oom_kill>(RS_EV_OOM_KILL, 900);
  oom.pid = 91;
  oom.killer_pid = 92;
  auto& core = r.Add<rs_core_dump>(RS_EV_CORE_DUMP, 1000);
  core.pid = 101;
  core.tgid = 100;
  core.sig = 6;
  std::strcpy(core.comm, "aborter");

  BpfBundleWriter w;
  const trace::FtraceEventBundle b = WriteAndReadBack(&w, r, /*lost=*/false);
  EXPECT_FALSE(b.has_lost_events());
  EXPECT_FALSE(b.has_compact_sched());
  ASSERT_EQ(b.event_size(), 10);
  for (int i = 0; i < b.event_size(); i++) {
    EXPECT_EQ(b.event(i).timestamp(), 100u * static_cast<uint64_t>(i + 1)) << i;
  }

  const trace::FtraceEvent& e0 = b.event(0);
  EXPECT_EQ(e0.pid(), 12u);
  ASSERT_TRUE(e0.has_sched_wakeup_new());
  EXPECT_EQ(e0.sched_wakeup_new().comm(), "newborn");
  EXPECT_EQ(e0.sched_wakeup_new().pid(), 11);
  EXPECT_EQ(e0.sched_wakeup_new().prio(), 120);
  EXPECT_EQ(e0.sched_wakeup_new().success(), 1);
  EXPECT_EQ(e0.sched_wakeup_new().target_cpu(), 3);

  const trace::FtraceEvent& e1 = b.event(1);
  EXPECT_EQ(e1.pid(), 21u);
  ASSERT_TRUE(e1.has_sched_migrate_task());
  EXPECT_EQ(e1.sched_migrate_task().comm(), "mover");
  EXPECT_EQ(e1.sched_migrate_task().pid(), 21);
  EXPECT_EQ(e1.sched_migrate_task().prio(), 110);
  EXPECT_EQ(e1.sched_migrate_task().orig_cpu(), 2);
  EXPECT_EQ(e1.sched_migrate_task().dest_cpu(), 5);

  const trace::FtraceEvent& e2 = b.event(2);
  EXPECT_EQ(e2.pid(), 31u);
  ASSERT_TRUE(e2.has_sched_process_fork());
  EXPECT_EQ(e2.sched_process_fork().parent_comm(), "parent");
  EXPECT_EQ(e2.sched_process_fork().parent_pid(), 31);
  EXPECT_EQ(e2.sched_process_fork().child_comm(), "child");
  EXPECT_EQ(e2.sched_process_fork().child_pid(), 32);
  EXPECT_EQ(e2.sched_process_fork().parent_tgid(), 30);
  EXPECT_EQ(e2.sched_process_fork().child_tgid(), 33);

  const trace::FtraceEvent& e3 = b.event(3);
  EXPECT_EQ(e3.pid(), 41u);
  ASSERT_TRUE(e3.has_sched_process_exec());
  EXPECT_EQ(e3.sched_process_exec().filename(), "/usr/bin/env");
  EXPECT_EQ(e3.sched_process_exec().pid(), 41);
  EXPECT_EQ(e3.sched_process_exec().old_pid(), 42);
  EXPECT_EQ(e3.sched_process_exec().argv(), std::string("env\0-i\0", 7));
  EXPECT_EQ(e3.sched_process_exec().uid(), 1001u);
  EXPECT_EQ(e3.sched_process_exec().tgid(), 40);
  EXPECT_EQ(e3.sched_process_exec().ppid(), 43);

  const trace::FtraceEvent& e4 = b.event(4);
  EXPECT_EQ(e4.pid(), 51u);
  ASSERT_TRUE(e4.has_sched_process_exit());
  EXPECT_EQ(e4.sched_process_exit().comm(), "leaver");
  EXPECT_EQ(e4.sched_process_exit().pid(), 51);
  EXPECT_EQ(e4.sched_process_exit().tgid(), 50);
  EXPECT_EQ(e4.sched_process_exit().exit_code(), 2);
  EXPECT_TRUE(e4.sched_process_exit().has_group_dead());
  EXPECT_FALSE(e4.sched_process_exit().group_dead());

  const trace::FtraceEvent& e5 = b.event(5);
  EXPECT_EQ(e5.pid(), 61u);
  ASSERT_TRUE(e5.has_task_rename());
  EXPECT_EQ(e5.task_rename().pid(), 61);
  EXPECT_EQ(e5.task_rename().oldcomm(), "before");
  EXPECT_EQ(e5.task_rename().newcomm(), "after");

  // Filed under the task that ran the RCU callback, not the freed one.
  const trace::FtraceEvent& e6 = b.event(6);
  EXPECT_EQ(e6.pid(), 72u);
  ASSERT_TRUE(e6.has_sched_process_free());
  EXPECT_EQ(e6.sched_process_free().comm(), "freed");
  EXPECT_EQ(e6.sched_process_free().pid(), 71);
  EXPECT_EQ(e6.sched_process_free().prio(), 130);

  const trace::FtraceEvent& e7 = b.event(7);
  EXPECT_EQ(e7.pid(), 81u);
  ASSERT_TRUE(e7.has_signal_generate());
  EXPECT_EQ(e7.signal_generate().code(), -6);
  EXPECT_EQ(e7.signal_generate().comm(), "victim");
  EXPECT_EQ(e7.signal_generate().pid(), 82);
  EXPECT_TRUE(e7.signal_generate().has_result());
  EXPECT_EQ(e7.signal_generate().result(), 0);
  EXPECT_EQ(e7.signal_generate().sig(), 9);

  const trace::FtraceEvent& e8 = b.event(8);
  EXPECT_EQ(e8.pid(), 92u);
  ASSERT_TRUE(e8.has_mark_victim());
  EXPECT_EQ(e8.mark_victim().pid(), 91);

  const trace::FtraceEvent& e9 = b.event(9);
  EXPECT_EQ(e9.pid(), 101u);
  ASSERT_TRUE(e9.has_generic());
  const trace::GenericFtraceEvent& g = e9.generic();
  EXPECT_EQ(g.event_name(), "ringside_core_dump");
  ASSERT_EQ(g.field_size(), 4);
  EXPECT_EQ(g.field(0).name(), "pid");
  EXPECT_EQ(g.field(0).int_value(), 101);
  EXPECT_EQ(g.field(1).name(), "tgid");
  EXPECT_EQ(g.field(1).int_value(), 100);
  EXPECT_EQ(g.field(2).name(), "sig");
  EXPECT_EQ(g.field(2).int_value(), 6);
  EXPECT_EQ(g.field(3).name(), "comm");
  EXPECT_EQ(g.field(3).str_value(), "aborter");

  EXPECT_EQ(w.total_events(), 10u);
  EXPECT_EQ(w.last_bundle_events()[RS_EV_TASK_RENAME], 1u);
}

// A bundle written in parts (how the BPF source writes a batch, telling the
// tracker of each part first) is the bundle written whole, byte for byte,
// counts what it holds, and hands out every record once, in order: 300
// switches and wakings over three parts, with comms that change between
// parts.
TEST(BpfBundleWriterTest, ABundleWrittenInPartsIsTheBundleWrittenWhole) {
  Records r;
  const char* const comms[] = {"storm-a", "storm-b", "swapper/1", "kworker/1:0"};
  uint64_t ts = 1'000'000;
  for (int i = 0; i < 300; i++) {
    if (i % 3 == 0) {
      auto& wake = r.Add<rs_sched_wakeup>(RS_EV_SCHED_WAKING, ts += 700);
      wake.pid = 1000 + i;
      wake.target_cpu = i % 2;
      wake.prio = 100 + i % 40;
      std::strcpy(wake.comm, comms[(i / 7) % 4]);
    } else {
      auto& sw = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, ts += 1300);
      sw.prev_pid = 1000 + i - 1;
      sw.next_pid = 1000 + i;
      sw.next_prio = 120;
      sw.prev_state = i % 4;
      std::strcpy(sw.next_comm, comms[(i / 5) % 4]);
    }
    if (i == 150) {
      auto& fork = r.Add<rs_process_fork>(RS_EV_PROCESS_FORK, ts += 100);
      fork.parent_pid = fork.parent_tgid = 1150;
      fork.child_pid = fork.child_tgid = 5000;
    }
  }
  const std::vector<bpf::RecordView> views = r.Views();
  bpf::RecordBatch batch;

  BpfBundleWriter whole;
  const std::vector<trace::TracePacket> a = testing::WriteAndReadBack([&](TraceWriter* writer) {
    whole.WriteBundle(writer, 1, whole.Decode(views, &batch), false);
  });
  BpfBundleWriter parts;
  std::vector<const void*> handed_out;
  size_t part_count = 0;
  const std::vector<trace::TracePacket> b = testing::WriteAndReadBack([&](TraceWriter* writer) {
    const absl::Span<const bpf::Record> records = parts.Decode(views, &batch);
    parts.WriteBundle(writer, 1, records, false, [&](absl::Span<const bpf::Record> part) {
      EXPECT_LE(part.size(), BpfBundleWriter::kRecordsPerPart);
      part_count++;
      for (const bpf::Record& record : part) handed_out.push_back(record.data);
    });
  });
  ASSERT_EQ(handed_out.size(), views.size());
  for (size_t i = 0; i < views.size(); i++) EXPECT_EQ(handed_out[i], views[i].data) << i;
  EXPECT_EQ(part_count, (views.size() + BpfBundleWriter::kRecordsPerPart - 1) /
                            BpfBundleWriter::kRecordsPerPart);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].SerializeAsString(), b[0].SerializeAsString());

  const auto& cs = b[0].ftrace_events().compact_sched();
  ASSERT_EQ(cs.switch_timestamp_size(), 200);
  ASSERT_EQ(cs.waking_timestamp_size(), 100);
  EXPECT_EQ(cs.switch_next_pid(199), 1299);
  EXPECT_EQ(cs.switch_prev_state(199), 3);
  EXPECT_EQ(cs.intern_table(static_cast<int>(cs.switch_next_comm_index(199))),
            comms[(299 / 5) % 4]);
  EXPECT_EQ(cs.waking_pid(99), 1297);
  EXPECT_EQ(cs.waking_prio(99), 100 + 297 % 40);
  EXPECT_EQ(cs.intern_table(static_cast<int>(cs.waking_comm_index(99))), comms[(297 / 7) % 4]);
  ASSERT_EQ(b[0].ftrace_events().event_size(), 1);
  EXPECT_EQ(b[0].ftrace_events().event(0).sched_process_fork().child_pid(), 5000);

  for (const BpfBundleWriter* w : {&whole, &parts}) {
    EXPECT_EQ(w->last_bundle_events()[RS_EV_SCHED_SWITCH], 200u);
    EXPECT_EQ(w->last_bundle_events()[RS_EV_SCHED_WAKING], 100u);
    EXPECT_EQ(w->last_bundle_events()[RS_EV_PROCESS_FORK], 1u);
    EXPECT_EQ(w->stats().events[RS_EV_SCHED_SWITCH], 200u);
    EXPECT_EQ(w->stats().bundles, 1u);
    EXPECT_EQ(w->total_events(), 301u);
  }
}

}  // namespace
}  // namespace ringside::agent
