// SPDX-License-Identifier: GPL-2.0
/* Scheduling: who ran where. */
#include "bpf/sched.bpf.h"
#include "bpf/rings.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* RS_TASK_STATE_RULE_* of the running kernel, set by the loader. */
const volatile __u32 task_state_rules = RS_TASK_STATE_RULES_NEWEST;

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  if (rs_filters_on() && !rs_task_selected(prev) && !rs_task_selected(next)) return 0;
  void* ring;
  struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e), &ring);
  if (!e) return 0;
  rs_fill_switch_tasks(e, preempt, prev, next, prev_state, task_state_rules);
  rs_fill_switch_comms(e, prev, next);
  rs_submit(ring, e);
  return 0;
}

static __always_inline int emit_wakeup(__u32 type, struct task_struct* p) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  void* ring;
  struct rs_sched_wakeup* e = rs_reserve(type, sizeof(*e), &ring);
  if (!e) return 0;
  struct task_struct* waker = bpf_get_current_task_btf();
  e->pid = p->pid;
  e->tgid = p->tgid;
  e->prio = p->prio;
  e->target_cpu = rs_task_cpu(p);
  e->waker_pid = waker->pid;
  e->waker_tgid = waker->tgid;
  __builtin_memcpy(e->comm, p->comm, RS_TASK_COMM_LEN);
  rs_submit(ring, e);
  return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct* p) {
  return emit_wakeup(RS_EV_SCHED_WAKEUP, p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct* p) {
  return emit_wakeup(RS_EV_SCHED_WAKEUP_NEW, p);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(handle_sched_migrate_task, struct task_struct* p, int dest_cpu) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  void* ring;
  struct rs_sched_migrate* e = rs_reserve(RS_EV_SCHED_MIGRATE, sizeof(*e), &ring);
  if (!e) return 0;
  e->pid = p->pid;
  e->tgid = p->tgid;
  e->prio = p->prio;
  e->orig_cpu = rs_task_cpu(p);
  e->dest_cpu = dest_cpu;
  e->pad = 0;
  __builtin_memcpy(e->comm, p->comm, RS_TASK_COMM_LEN);
  rs_submit(ring, e);
  return 0;
}
