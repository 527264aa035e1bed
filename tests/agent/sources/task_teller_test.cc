#include "agent/sources/task_teller.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bpf/sched_events.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/read_packets.h"

namespace ringside::agent {
namespace {

// Records as the rings hold them, each kept alive for its bpf::Record.
class Records {
 public:
  template <typename T>
  T& Add(uint32_t type, uint64_t ts) {
    storage_.emplace_back(sizeof(T) / 8 + 1, 0);
    T* t = reinterpret_cast<T*>(storage_.back().data());
    t->h.type = type;
    t->h.size = sizeof(T);
    t->h.ts_ns = ts;
    records_.push_back({type, t});
    return *t;
  }
  absl::Span<const bpf::Record> All() const { return records_; }

 private:
  std::vector<std::vector<uint64_t>> storage_;
  std::vector<bpf::Record> records_;
};

// Every task a scheduling record names is described by the record that
// first names it: a switch's two, a wakeup's wakee, a migration's task, and
// a dead task's final switch; told in parts, as the BPF source tells a
// batch, each task is told once (a later record's comm changes nothing).
TEST(TaskTellerTest, EachTaskASchedulingRecordNamesIsDescribedByTheFirst) {
  Records r;
  auto& sw = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, 1000);
  sw.prev_pid = sw.prev_tgid = 10;
  std::strcpy(sw.prev_comm, "leaving");
  sw.prev_state = 1;
  sw.next_pid = sw.next_tgid = 11;
  std::strcpy(sw.next_comm, "coming");
  auto& wake = r.Add<rs_sched_wakeup>(RS_EV_SCHED_WAKING, 1100);
  wake.pid = 12;
  wake.tgid = 11;
  std::strcpy(wake.comm, "woken");
  auto& again = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, 1200);
  again.prev_pid = again.prev_tgid = 11;
  std::strcpy(again.prev_comm, "renamed");
  again.prev_state = 1;
  again.next_pid = again.next_tgid = 10;
  std::strcpy(again.next_comm, "leaving");
  auto& migrate = r.Add<rs_sched_migrate>(RS_EV_SCHED_MIGRATE, 1300);
  migrate.pid = migrate.tgid = 13;
  std::strcpy(migrate.comm, "moved");
  auto& dead = r.Add<rs_sched_switch>(RS_EV_SCHED_SWITCH, 1400);
  dead.prev_pid = dead.prev_tgid = 14;
  std::strcpy(dead.prev_comm, "dying");
  dead.prev_state = 0x10;  // X: its final switch.

  DescriptorTracker tracker;
  TaskTeller teller(&tracker);
  const absl::Span<const bpf::Record> all = r.All();
  teller.Tell(all.subspan(0, 2));
  teller.Tell(all.subspan(2));
  EXPECT_EQ(testing::ThreadNames(&tracker),
            (std::map<int32_t, std::string>{
                {10, "leaving"}, {11, "coming"}, {12, "woken"}, {13, "moved"}, {14, "dying"}}));

  TaskTeller no_tracker(nullptr);
  no_tracker.Tell(all);  // Tells nothing, and reads nothing.
}

}  // namespace
}  // namespace ringside::agent
