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

}  // namespace
}  // namespace ringside::agent
