/* How bpf/sched.bpf.c fills its sched_switch and sched_waking records,
 * shared with the benchmarks that time its parts. */
#ifndef RINGSIDE_BPF_SCHED_BPF_H_
#define RINGSIDE_BPF_SCHED_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/rings.bpf.h"
#include "bpf/sched_events.h"
#include "bpf/task_state.h"

/* Every field but the header and the comms. `raw`: see RS_READ. */
static __always_inline void rs_fill_switch_tasks(bool raw, struct rs_sched_switch* e, bool preempt,
                                                 struct task_struct* prev, struct task_struct* next,
                                                 unsigned int prev_state, __u32 rules) {
  e->prev_pid = RS_READ(raw, prev, pid);
  e->prev_tgid = RS_READ(raw, prev, tgid);
  e->next_pid = RS_READ(raw, next, pid);
  e->next_tgid = RS_READ(raw, next, tgid);
  e->prev_prio = RS_READ(raw, prev, prio);
  e->next_prio = RS_READ(raw, next, prio);
  e->prev_state = rs_sched_switch_state(preempt, prev_state, RS_READ(raw, prev, exit_state), rules);
}

static __always_inline void rs_fill_switch_comms(bool raw, struct rs_sched_switch* e,
                                                 struct task_struct* prev,
                                                 struct task_struct* next) {
  RS_READ_COMM(raw, e->prev_comm, prev);
  RS_READ_COMM(raw, e->next_comm, next);
}

/* Every field of a wakeup record but the header; the waker is the task
 * running the wakeup (read with the helper every kernel has:
 * bpf_get_current_task_btf() came in 5.11). */
static __always_inline void rs_fill_wakeup(bool raw, struct rs_sched_wakeup* e,
                                           struct task_struct* p) {
  const __u64 waker = bpf_get_current_pid_tgid();
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->prio = RS_READ(raw, p, prio);
  e->target_cpu = rs_task_cpu(raw, p);
  e->waker_pid = (__u32)waker;
  e->waker_tgid = waker >> 32;
  RS_READ_COMM(raw, e->comm, p);
}

#endif /* RINGSIDE_BPF_SCHED_BPF_H_ */
