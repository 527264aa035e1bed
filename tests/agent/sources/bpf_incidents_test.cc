#include "agent/sources/bpf_incidents.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bpf/records.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

rs_task_stall Stall(uint32_t type, uint64_t since_ns, uint64_t ts_ns) {
  rs_task_stall e{};
  e.h.type = static_cast<__u16>(type);
  e.h.size = sizeof(e);
  e.h.cpu = 1;
  e.h.ts_ns = ts_ns;
  e.since_ns = since_ns;
  e.cgroup_id = 42;
  e.pid = 300;
  e.tgid = 299;
  e.other_pid = 301;
  e.cpu = 0;
  e.how = type == RS_EV_TASK_BLOCKED ? RS_STALL_WOKEN : RS_STALL_QUEUED;
  std::strcpy(e.comm, "postgres");
  std::strcpy(e.other_comm, "kworker/0:1");
  return e;
}

bpf::Record RecordOf(const rs_task_stall& e) { return bpf::Record{e.h.type, &e}; }

TEST(BpfIncidentsTest, AStallRecordIsAnIncidentNamingTheTaskHowLongAndTheOtherTask) {
  const rs_task_stall blocked = Stall(RS_EV_TASK_BLOCKED, 1'000'000'000, 3'500'000'000);
  const std::optional<Incident> b = IncidentOfRecord(RecordOf(blocked));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->kind, Incident::Kind::kBlocked);
  EXPECT_EQ(b->boottime_ns, 3'500'000'000);
  EXPECT_EQ(b->since_ns, 1'000'000'000);
  EXPECT_EQ(b->stalled_ns, 2'500'000'000);
  EXPECT_EQ(b->pid, 300);
  EXPECT_EQ(b->tgid, 299);
  EXPECT_EQ(b->cgroup_id, 42u);
  EXPECT_EQ(b->cpu, 0);  // Where it blocked.
  EXPECT_FALSE(b->still_blocked);
  EXPECT_EQ(IncidentDetail(*b),
            "pid 300 (postgres) blocked in D for 2.5s, woken in the context of pid 301 "
            "(kworker/0:1)");

  const rs_task_stall waited = Stall(RS_EV_RUNQUEUE_DELAY, 1'000'000'000, 1'123'456'789);
  const std::optional<Incident> w = IncidentOfRecord(RecordOf(waited));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->kind, Incident::Kind::kRunqueueDelay);
  EXPECT_EQ(w->cpu, 1);  // Where it waited and ran: the record's CPU.
  EXPECT_EQ(IncidentDetail(*w),
            "pid 300 (postgres) waited 123.4ms for cpu 1, behind pid 301 (kworker/0:1)");
  // A clock read out of order never makes a negative stall.
  const rs_task_stall odd = Stall(RS_EV_RUNQUEUE_DELAY, 2'000, 1'000);
  EXPECT_EQ(IncidentOfRecord(RecordOf(odd))->stalled_ns, 0);
}

TEST(BpfIncidentsTest, StallsOfTakesTheLeastThresholdOfEachKind) {
  config::TraceConfig cfg;
  EXPECT_EQ(StallsOf(cfg).blocked_ns, 0u);
  EXPECT_EQ(StallsOf(cfg).max_tasks, 0u);
  auto* tc = cfg.mutable_trigger_config();
  tc->add_triggers()->mutable_blocked()->set_threshold_ms(3000);
  tc->add_triggers()->mutable_blocked()->set_threshold_ms(1500);
  tc->add_triggers()->mutable_runqueue_delay()->set_threshold_ms(40);
  const bpf::LoadedGroups::Request::Stalls s = StallsOf(cfg);
  EXPECT_EQ(s.blocked_ns, 1'500'000'000u);
  EXPECT_EQ(s.runqueue_ns, 40'000'000u);
  EXPECT_GT(s.max_tasks, 0u);
}

bpf::StallTasks::Blocked StillBlocked(int32_t tid, uint64_t since_ns) {
  bpf::StallTasks::Blocked b{};
  b.tid = tid;
  b.task.since_ns = since_ns;
  b.task.kind = RS_STALL_BLOCKED;
  b.task.tgid = tid;
  b.task.cpu = 1;
  std::strcpy(b.task.comm, "fsync-er");
  return b;
}

// A block is told once a threshold: by the first sweep that finds it past
// one, not by the next ones, nor by its wakeup's record, unless that record
// reaches a threshold no sweep told; a new block of the same task is
// another.
TEST(BpfIncidentsTest, TheSweepTellsEachBlockOnceAThresholdAndItsWakeupOnlyPastANewOne) {
  StallSweep sweep({1'000'000'000, 10'000'000'000});
  EXPECT_EQ(sweep.period_ns(), 250'000'000);
  const int64_t t0 = 2'200'000'000;
  EXPECT_TRUE(sweep.Due(t0));
  std::vector<Incident> told = sweep.Sweep({StillBlocked(7, 1'000'000'000)}, t0);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].kind, Incident::Kind::kBlocked);
  EXPECT_TRUE(told[0].still_blocked);
  EXPECT_EQ(told[0].pid, 7);
  EXPECT_EQ(told[0].stalled_ns, 1'200'000'000);
  EXPECT_EQ(told[0].boottime_ns, t0);
  EXPECT_EQ(IncidentDetail(told[0]),
            "pid 7 (fsync-er) blocked in D for 1.2s and not woken yet (cpu 1)");
  EXPECT_FALSE(sweep.Due(t0 + 200'000'000));
  EXPECT_TRUE(sweep.Due(t0 + 250'000'000));
  EXPECT_TRUE(sweep.Sweep({StillBlocked(7, 1'000'000'000)}, t0 + 250'000'000).empty());
  // Past the second threshold: told again, for the trigger of 10 s.
  told = sweep.Sweep({StillBlocked(7, 1'000'000'000)}, 11'500'000'000);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].stalled_ns, 10'500'000'000);
  // Woken: its record is the same block, every threshold it reaches told.
  EXPECT_FALSE(sweep.TellWoken(7, 1'000'000'000, 10'600'000'000));
  // Blocked again: a new block; woken past the second threshold, which no
  // sweep told of it: its record is told.
  ASSERT_EQ(sweep.Sweep({StillBlocked(7, 20'000'000'000)}, 21'100'000'000).size(), 1u);
  EXPECT_TRUE(sweep.TellWoken(7, 20'000'000'000, 30'000'000'000));
  // A block no sweep found is told by its record.
  EXPECT_TRUE(sweep.TellWoken(8, 5'000'000'000, 1'500'000'000));
}

TEST(BpfIncidentsTest, TheSweepRemembersABlockAWhileAfterItIsGone) {
  StallSweep sweep({600'000'000'000});
  EXPECT_EQ(sweep.period_ns(), 1'000'000'000);
  EXPECT_EQ(StallSweep({10'000'000}).period_ns(), 100'000'000);
  const int64_t t0 = 700'000'000'000;
  ASSERT_EQ(sweep.Sweep({StillBlocked(7, 1'000)}, t0).size(), 1u);
  // Gone from the map (woken), its record still on the way: kept.
  sweep.Sweep({}, t0 + 1'000'000'000);
  EXPECT_FALSE(sweep.TellWoken(7, 1'000, t0 + 1'000'000'000));
  ASSERT_EQ(sweep.Sweep({StillBlocked(9, 1'000)}, t0).size(), 1u);
  sweep.Sweep({}, t0 + 60'000'000'000);
  EXPECT_TRUE(sweep.TellWoken(9, 1'000, t0 + 60'000'000'000));
}

// The sweep's check of a task it found blocked: its state in /proc, after
// the comm, which may hold spaces and parentheses.
TEST(BpfIncidentsTest, TaskInDReadsTheStateAfterTheComm) {
  testing::ScratchDir proc;
  for (const auto& [tid, stat] : {std::pair<int, std::string>{7, "7 (a) b) D 1 7 7 0"},
                                  {8, "8 (sleepy) S 1 8 8 0"},
                                  {9, "9 (cut"}}) {
    mkdir(proc.Join(std::to_string(tid)).c_str(), 0755);
    std::ofstream(proc.Join(absl::StrCat(tid, "/stat"))) << stat;
  }
  EXPECT_TRUE(TaskInD(7, proc.path()));
  EXPECT_FALSE(TaskInD(8, proc.path()));
  EXPECT_FALSE(TaskInD(9, proc.path()));
  EXPECT_FALSE(TaskInD(10, proc.path()));  // Gone.
}

TEST(BpfIncidentsTest, BlockedThresholdsAreEachOnceAscending) {
  config::TraceConfig cfg;
  auto* tc = cfg.mutable_trigger_config();
  tc->add_triggers()->mutable_blocked()->set_threshold_ms(3000);
  tc->add_triggers()->mutable_blocked()->set_threshold_ms(1000);
  tc->add_triggers()->mutable_blocked()->set_threshold_ms(3000);
  tc->add_triggers()->mutable_runqueue_delay()->set_threshold_ms(5);
  EXPECT_EQ(BlockedThresholdsOf(cfg), (std::vector<int64_t>{1'000'000'000, 3'000'000'000}));
}

}  // namespace
}  // namespace ringside::agent
