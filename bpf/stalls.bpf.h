/* Stalls, for the `blocked` and `runqueue_delay` triggers: a task off the
 * CPU in D (uninterruptible) for too long, and a runnable task kept from a
 * CPU for too long. Included by bpf/sched.bpf.c, whose switch and wakeup
 * programs call it: a program of its own on the same tracepoints would
 * cost every event a second run. Both thresholds are rodata: with neither
 * configured (0), the verifier drops all of it and a switch pays nothing.
 *
 * Blocks: a task's block in D waits in `stall_tasks` (by tid), from the
 * switch that takes it off the CPU to the sched_waking that ends it, which
 * writes a record when it lasted stall_blocked_ns or more and removes it
 * (or, should the wakeup miss it, to the switch that runs the task again,
 * or failing that to its next switch out). Only switches into D, the
 * wakeups of tasks in D and the switches of tasks that blocked in D touch
 * the map, so it holds the tasks blocked now.
 * A task that never wakes writes no record: the agent sweeps the map for
 * entries older than the threshold (BpfDataSource).
 *
 * Waits for a CPU: the kernel itself keeps when each runnable task was
 * queued (sched_info.last_queued); the switch that runs it compares that
 * with its run queue's clock, and writes a record when it waited
 * stall_runqueue_ns or more. No map. */
#ifndef RINGSIDE_BPF_STALLS_BPF_H_
#define RINGSIDE_BPF_STALLS_BPF_H_

#include "bpf/incident_events.h"
#include "bpf/rings.bpf.h"
#include "bpf/task_state.h"

/* Set by the loader: the least stall that makes a record; 0: not measured. */
const volatile __u64 stall_blocked_ns = 0;
const volatile __u64 stall_runqueue_ns = 0;

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* The loader sizes it. */
  __type(key, __u32);
  __type(value, struct rs_stall_task);
} stall_tasks SEC(".maps");

/* Which task last blocked in D, by tid & (RS_STALL_SLOTS - 1): a switch in
 * looks the map up only for its slot's owner. 16 KiB of .bss, read in
 * place: as an array map of 16384 slots, the check cost BM_VsClock's fork
 * loop 84 ns a switch; this, about 57. */
#define RS_STALL_SLOTS 4096
__u32 stall_slots[RS_STALL_SLOTS] = {};

/* Blocks in D that found stall_tasks full: unmeasured. */
__u64 stall_tasks_full = 0;

/* Who a stall record names beside its task. */
enum rs_stall_other { RS_OTHER_NONE, RS_OTHER_TASK, RS_OTHER_CURRENT };

/* Writes a stall record of `task` (RS_EV_TASK_BLOCKED or
 * RS_EV_RUNQUEUE_DELAY), naming `other` (RS_OTHER_TASK) or the current task
 * (read with the helpers every kernel has: bpf_get_current_task_btf() came
 * in 5.11). */
static __always_inline void rs_emit_stall(bool raw, __u32 type, __u32 how, struct task_struct* task,
                                          enum rs_stall_other which, struct task_struct* other,
                                          __u64 since_ns, __s32 cpu) {
  void* ring;
  struct rs_task_stall* e = rs_reserve(type, sizeof(*e), &ring);
  if (!e) return;
  e->since_ns = since_ns;
  e->cgroup_id = rs_cgroup_id_of(task);
  e->pid = RS_READ(raw, task, pid);
  e->tgid = RS_READ(raw, task, tgid);
  e->cpu = cpu;
  e->how = how;
  e->pad = 0;
  RS_READ_COMM(raw, e->comm, task);
  if (which == RS_OTHER_TASK) {
    e->other_pid = RS_READ(raw, other, pid);
    RS_READ_COMM(raw, e->other_comm, other);
  } else if (which == RS_OTHER_CURRENT) {
    e->other_pid = (__u32)bpf_get_current_pid_tgid();
    bpf_get_current_comm(e->other_comm, RS_TASK_COMM_LEN);
  } else {
    e->other_pid = 0;
    __builtin_memset(e->other_comm, 0, RS_TASK_COMM_LEN);
  }
  rs_submit_now(ring, e);
}

/* The entry of `tid`, made empty (kind 0) when it has none; NULL when the
 * map is full (counted). */
static __always_inline struct rs_stall_task* rs_stall_entry(__u32 tid) {
  struct rs_stall_task* t = bpf_map_lookup_elem(&stall_tasks, &tid);
  if (t) return t;
  struct rs_stall_task fresh = {};
  if (bpf_map_update_elem(&stall_tasks, &tid, &fresh, BPF_NOEXIST) != 0 &&
      bpf_map_lookup_elem(&stall_tasks, &tid) == NULL) {
    __sync_fetch_and_add(&stall_tasks_full, 1);
    return NULL;
  }
  return bpf_map_lookup_elem(&stall_tasks, &tid);
}

/* `next` runs on this CPU: how long it waited for it, from the kernel's own
 * account (CONFIG_SCHED_INFO, as sched_info's run_delay and
 * /proc/PID/schedstat count it): last_queued is when it was queued on this
 * run queue (woken, preempted, or migrated here), on the run queue's clock,
 * and is cleared only after this tracepoint. The run queue is found through
 * the task's cfs_rq, which every task has (of the CPU it is on) with
 * CONFIG_FAIR_GROUP_SCHED, whatever its class: no map, no kernel symbol
 * (a per-CPU variable's address is in kallsyms only with
 * CONFIG_KALLSYMS_ALL). A kernel without these fields measures nothing
 * (the loader says so: PlaceRunqueueDelays). */
static __always_inline void rs_stall_runqueue(bool raw, struct task_struct* prev,
                                              struct task_struct* next) {
  if (stall_runqueue_ns == 0) return;
  if (!bpf_core_field_exists(next->sched_info.last_queued) ||
      !bpf_core_field_exists(next->se.cfs_rq) || !bpf_core_field_exists(struct cfs_rq, rq)) {
    return;
  }
  const __u64 queued = RS_READ(raw, next, sched_info.last_queued);
  if (queued == 0) return;
  struct cfs_rq* cfs_rq = RS_READ(raw, next, se.cfs_rq);
  if (!cfs_rq) return;
  struct rq* rq = RS_READ(raw, cfs_rq, rq);
  if (!rq) return;
  const __u64 now = RS_READ(raw, rq, clock);
  if (now <= queued || now - queued < stall_runqueue_ns) return;
  /* On the record's own clock, the wait ends now and began as long ago. */
  const __u64 boot_now = bpf_ktime_get_boot_ns();
  rs_emit_stall(raw, RS_EV_RUNQUEUE_DELAY, RS_STALL_QUEUED, next, RS_OTHER_TASK, prev,
                boot_now - (now - queued), bpf_get_smp_processor_id());
}

/* Task `tid` ran: whatever block of it is still in the map is over. Only
 * a task that owns its slot (stall_slots) is looked up. */
static __always_inline void rs_stall_ran(__u32 tid) {
  __u32* owner = &stall_slots[tid & (RS_STALL_SLOTS - 1)];
  if (*owner != tid || tid == 0) return;
  *owner = 0;
  if (bpf_map_lookup_elem(&stall_tasks, &tid)) bpf_map_delete_elem(&stall_tasks, &tid);
}

/* `prev` leaves this CPU in `state` (as sched_switch reports it) at `now`:
 * one in D is followed until its wakeup. One leaving in another state ran,
 * and a block of it still followed is over: its wakeup and its switch in
 * can both go unseen (see rs_stall_switch_in; and a kernel can skip a
 * switch's tracepoint), and the agent's sweep would report the task
 * blocked since. */
static __always_inline void rs_stall_switch_out(bool raw, struct task_struct* prev, __s64 state,
                                                __u64 now) {
  if (stall_blocked_ns == 0) return;
  __u32 tid = RS_READ(raw, prev, pid);
  if (state != RS_TASK_UNINTERRUPTIBLE) {
    rs_stall_ran(tid);
    return;
  }
  if (tid == 0) return;
  struct rs_stall_task* t = rs_stall_entry(tid);
  if (!t) return;
  t->since_ns = now;
  t->cpu = bpf_get_smp_processor_id();
  t->kind = RS_STALL_BLOCKED;
  t->how = 0;
  t->tgid = RS_READ(raw, prev, tgid);
  t->cgroup_id = rs_cgroup_id_of(prev);
  RS_READ_COMM(raw, t->comm, prev);
  stall_slots[tid & (RS_STALL_SLOTS - 1)] = tid;
}

/* `next` runs: whatever block of it is still in the map is over. Its
 * wakeup removes it as a rule, but a wakeup can miss it: one that runs
 * before the switch's tracepoint (try_to_wake_up() waits for the task to
 * leave its CPU only after sched_waking), one that finds the task still
 * queued as it goes to sleep (and then wakes it another way), a killable
 * wait with a fatal signal pending (reported D, never dequeued). So each
 * switch in looks at its task's slot, an array read, and only a task that
 * owns its slot is looked up in the map. */
static __always_inline void rs_stall_switch_in(bool raw, struct task_struct* next) {
  if (stall_blocked_ns == 0) return;
  rs_stall_ran(RS_READ(raw, next, pid));
}

/* `p` is woken at `now` (sched_waking, in the waker's context, before the
 * kernel changes its state; `rules`: RS_TASK_STATE_RULE_*): its block in D
 * ends, and its entry goes, so that the map holds the tasks blocked now.
 * Only a task still in D is looked up: other wakeups cost a read of its
 * state. The record names the task that ran the wakeup: the waker, or in
 * an interrupt (a disk's completion) whatever it interrupted. */
static __always_inline void rs_stall_waking(bool raw, struct task_struct* p, __u64 now,
                                            __u32 rules) {
  if (stall_blocked_ns == 0) return;
  if (rs_sched_switch_state(0, rs_task_state(raw, p), 0, rules) != RS_TASK_UNINTERRUPTIBLE) return;
  __u32 tid = RS_READ(raw, p, pid);
  struct rs_stall_task* t = bpf_map_lookup_elem(&stall_tasks, &tid);
  if (!t || t->kind != RS_STALL_BLOCKED) return;
  const __u64 blocked = now > t->since_ns ? now - t->since_ns : 0;
  if (blocked >= stall_blocked_ns) {
    rs_emit_stall(raw, RS_EV_TASK_BLOCKED, RS_STALL_WOKEN, p, RS_OTHER_CURRENT, NULL, t->since_ns,
                  t->cpu);
  }
  bpf_map_delete_elem(&stall_tasks, &tid);
  /* Its switch in has nothing left to end. */
  __u32* owner = &stall_slots[tid & (RS_STALL_SLOTS - 1)];
  if (*owner == tid) *owner = 0;
}

#endif /* RINGSIDE_BPF_STALLS_BPF_H_ */
