/* How bpf/sched.bpf.c fills its sched_switch and sched_waking records,
 * shared with the benchmarks that time its parts. */
#ifndef RINGSIDE_BPF_SCHED_BPF_H_
#define RINGSIDE_BPF_SCHED_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/rings.bpf.h"
#include "bpf/sched_events.h"
#include "bpf/task_state.h"

/* Every field but the header and the comms. */
static __always_inline void rs_fill_switch_tasks(struct rs_sched_switch* e, bool preempt,
                                                 struct task_struct* prev, struct task_struct* next,
                                                 unsigned int prev_state, __u32 rules) {
  e->prev_pid = prev->pid;
  e->prev_tgid = prev->tgid;
  e->next_pid = next->pid;
  e->next_tgid = next->tgid;
  e->prev_prio = prev->prio;
  e->next_prio = next->prio;
  e->prev_state = rs_sched_switch_state(preempt, prev_state, prev->exit_state, rules);
}

static __always_inline void rs_fill_switch_comms(struct rs_sched_switch* e,
                                                 struct task_struct* prev,
                                                 struct task_struct* next) {
  __builtin_memcpy(e->prev_comm, prev->comm, RS_TASK_COMM_LEN);
  __builtin_memcpy(e->next_comm, next->comm, RS_TASK_COMM_LEN);
}

/* Every field of a wakeup record but the header; the waker is the task
 * running the wakeup (read with the helper every kernel has:
 * bpf_get_current_task_btf() came in 5.11). */
static __always_inline void rs_fill_wakeup(struct rs_sched_wakeup* e, struct task_struct* p) {
  const __u64 waker = bpf_get_current_pid_tgid();
  e->pid = p->pid;
  e->tgid = p->tgid;
  e->prio = p->prio;
  e->target_cpu = rs_task_cpu(p);
  e->waker_pid = (__u32)waker;
  e->waker_tgid = waker >> 32;
  __builtin_memcpy(e->comm, p->comm, RS_TASK_COMM_LEN);
}

#endif /* RINGSIDE_BPF_SCHED_BPF_H_ */
