#include "bpf/event_types.h"

#include <set>
#include <string>

#include "bpf/event_source.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

// Every record type the programs write has exactly one row, below the
// drop counters' RS_EV_MAX, and no row is another's (the decoder, the
// encoder and the loss names would disagree).
TEST(EventTypesTest, EachRecordTypeHasOneRow) {
  std::set<uint32_t> types;
  for (const EventType& e : kEventTypes) {
    EXPECT_TRUE(types.insert(e.type).second) << "type " << e.type << " twice";
    EXPECT_GT(e.type, 0u) << e.name;
    EXPECT_LT(e.type, uint32_t{RS_EV_MAX}) << e.name;
    EXPECT_GE(e.size, sizeof(rs_event_header)) << e.name;
    EXPECT_EQ(FindEventType(e.type), &e);
  }
  for (uint32_t t :
       {RS_EV_SCHED_SWITCH, RS_EV_SCHED_WAKING, RS_EV_SCHED_WAKEUP_NEW, RS_EV_SCHED_MIGRATE,
        RS_EV_PROCESS_FORK, RS_EV_PROCESS_EXEC, RS_EV_PROCESS_EXIT, RS_EV_TASK_RENAME,
        RS_EV_PROCESS_FREE, RS_EV_OOM_KILL, RS_EV_FATAL_SIGNAL, RS_EV_CORE_DUMP}) {
    EXPECT_NE(FindEventType(t), nullptr) << "RS_EV " << t << " has no row";
  }
  // The batch is a container of records, not one.
  EXPECT_EQ(FindEventType(RS_EV_SCHED_BATCH), nullptr);
  EXPECT_EQ(FindEventType(0), nullptr);
}

// What an ftrace source beside an unfiltered BPF source leaves out: each
// group's every-hit tracepoints, from the table.
TEST(EventTypesTest, EachGroupRecordsItsOwnTracepoints) {
  EventSource::Options sched_only;
  sched_only.process = false;
  EXPECT_EQ(EventSource::RecordedTracepoints(sched_only),
            (std::vector<std::string>{"sched/sched_switch", "sched/sched_waking",
                                      "sched/sched_wakeup_new", "sched/sched_migrate_task"}));
  EventSource::Options process_only;
  process_only.sched = false;
  EXPECT_EQ(EventSource::RecordedTracepoints(process_only),
            (std::vector<std::string>{"sched/sched_process_fork", "sched/sched_process_exec",
                                      "sched/sched_process_exit", "task/task_rename",
                                      "sched/sched_process_free"}));
  // The incident programs record incidents only, not every hit.
  EventSource::Options incidents_only;
  incidents_only.sched = false;
  incidents_only.process = false;
  EXPECT_TRUE(EventSource::RecordedTracepoints(incidents_only).empty());
}

}  // namespace
}  // namespace ringside::bpf
