#include "agent/sources/task_teller.h"

#include "bpf/common_events.h"
#include "bpf/process_events.h"
#include "bpf/sched_events.h"

namespace ringside::agent {
namespace {

// sched_switch's prev_state of a task that exited: X (EXIT_DEAD), Z
// (EXIT_ZOMBIE), as bpf/task_state.h reports them.
constexpr int64_t kExitStates = 0x10 | 0x20;

}  // namespace

void TaskTeller::Tell(absl::Span<const bpf::Record> records) {
  DescriptorTracker* t = tracker_;
  if (t == nullptr) return;
  if (told_.size() > kMaxToldTasks) told_.Clear();
  // A task a scheduling record names, the first time: described by it if
  // the tracker has nothing of it yet (DescriptorTracker::OnSeen).
  auto seen = [this, t](uint64_t ts, int32_t tid, int32_t tgid,
                        const char(&comm)[RS_TASK_COMM_LEN]) {
    if (tid != 0 && told_.Insert(tid) && !t->OnSeen(ts, tid, tgid, bpf::CommOf(comm))) {
      told_.Erase(tid);  // Its id's task exited just before: ask again later.
    }
  };
  for (const bpf::Record& r : records) {
    switch (r.type) {
      case RS_EV_PROCESS_FORK: {
        const rs_process_fork& e = r.fork();
        t->OnFork(e.h.ts_ns, e.parent_pid, e.parent_tgid, e.child_pid, e.child_tgid,
                  bpf::CommOf(e.child_comm));
        told_.Insert(e.child_pid);
        break;
      }
      case RS_EV_PROCESS_EXEC: {
        const rs_process_exec& e = r.exec();
        t->OnExec(e.h.ts_ns, e.pid, e.tgid, bpf::ExecFilename(e), bpf::ExecArgv(e),
                  bpf::CommOf(e.comm), e.ppid, e.uid, e.cgroup_id);
        told_.Insert(e.pid);
        break;
      }
      case RS_EV_PROCESS_EXIT: {
        const rs_process_exit& e = r.exit();
        t->OnExit(e.h.ts_ns, e.pid, e.tgid, e.group_dead != 0, bpf::CommOf(e.comm));
        told_.Erase(e.pid);
        break;
      }
      case RS_EV_TASK_RENAME:
        t->OnRename(r.rename().h.ts_ns, r.rename().pid, bpf::CommOf(r.rename().new_comm));
        break;
      case RS_EV_PROCESS_FREE: {
        const rs_process_free& e = r.process_free();
        t->OnFree(e.h.ts_ns, e.pid, e.tgid, bpf::CommOf(e.comm));
        break;
      }
      case RS_EV_SCHED_SWITCH: {
        const rs_sched_switch& e = r.sched_switch();
        if ((e.prev_state & kExitStates) != 0 && e.prev_pid != 0) {
          // A dead task's last switch (X or Z): names it if nothing else
          // did, as one whose exit came before recording began.
          t->OnFinalSwitch(e.h.ts_ns, e.prev_pid, e.prev_tgid, bpf::CommOf(e.prev_comm));
          told_.Erase(e.prev_pid);
        } else {
          seen(e.h.ts_ns, e.prev_pid, e.prev_tgid, e.prev_comm);
        }
        seen(e.h.ts_ns, e.next_pid, e.next_tgid, e.next_comm);
        break;
      }
      case RS_EV_SCHED_WAKING:
      case RS_EV_SCHED_WAKEUP_NEW: {
        const rs_sched_wakeup& e = r.wakeup();
        seen(e.h.ts_ns, e.pid, e.tgid, e.comm);
        break;
      }
      case RS_EV_SCHED_MIGRATE: {
        const rs_sched_migrate& e = r.migrate();
        seen(e.h.ts_ns, e.pid, e.tgid, e.comm);
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace ringside::agent
