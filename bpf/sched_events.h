/* Scheduling records (bpf/sched.bpf.c). */
#ifndef RINGSIDE_BPF_SCHED_EVENTS_H_
#define RINGSIDE_BPF_SCHED_EVENTS_H_

#include "bpf/common_events.h"

/* RS_EV_SCHED_SWITCH: prev leaves the CPU, next gets it. */
struct rs_sched_switch {
  struct rs_event_header h;
  __s32 prev_pid;
  __s32 prev_tgid;
  __s32 next_pid;
  __s32 next_tgid;
  __s32 prev_prio;
  __s32 next_prio;
  __s64 prev_state; /* As the tracepoint reports it: rs_sched_switch_state(). */
  char prev_comm[RS_TASK_COMM_LEN];
  char next_comm[RS_TASK_COMM_LEN];
};

/* Most sched_switch records in one batch (bpf/sched.bpf.c). */
#define RS_SWITCH_BATCH_MAX 42

/* RS_EV_SCHED_SWITCH_BATCH: the header (its size covers the records that
 * follow; ts_ns is the first record's) and up to RS_SWITCH_BATCH_MAX
 * sched_switch records of the header's CPU, in the order they happened. */
struct rs_switch_batch {
  struct rs_event_header h;
  struct rs_sched_switch records[RS_SWITCH_BATCH_MAX];
};

/* RS_EV_SCHED_WAKEUP and RS_EV_SCHED_WAKEUP_NEW: `pid` becomes runnable on
 * `target_cpu`; the waker is the task that ran the wakeup. */
struct rs_sched_wakeup {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 prio;
  __s32 target_cpu;
  __s32 waker_pid;
  __s32 waker_tgid;
  char comm[RS_TASK_COMM_LEN];
};

/* RS_EV_SCHED_MIGRATE: `pid` moves from orig_cpu to dest_cpu. */
struct rs_sched_migrate {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 prio;
  __s32 orig_cpu;
  __s32 dest_cpu;
  __s32 pad;
  char comm[RS_TASK_COMM_LEN];
};

#endif /* RINGSIDE_BPF_SCHED_EVENTS_H_ */
