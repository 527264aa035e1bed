/* Incident records (bpf/incidents.bpf.c): what went wrong. They are also
 * what snapshot triggers fire on. */
#ifndef RINGSIDE_BPF_INCIDENT_EVENTS_H_
#define RINGSIDE_BPF_INCIDENT_EVENTS_H_

#include "bpf/common_events.h"

/* Every incident record carries the cgroup v2 id (the inode number of its
 * directory) of the task it happened to, for triggers that filter by cgroup;
 * 0 when unknown. */

/* RS_EV_OOM_KILL: the OOM killer chose a victim. On kernels whose
 * oom/mark_victim reports only a pid, tgid, uid, comm and cgroup_id are
 * 0/empty. */
struct rs_oom_kill {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __u32 uid;
  __s32 killer_pid; /* The task whose allocation ran the OOM killer. */
  char comm[RS_TASK_COMM_LEN];
  __u64 cgroup_id;
};

/* RS_EV_FATAL_SIGNAL: a signal whose action will kill the target (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT with the default action, or SIGKILL) was
 * sent. For a fault, sender and target are the same task. */
struct rs_fatal_signal {
  struct rs_event_header h;
  __s32 sig;
  __s32 si_code;
  __s32 sender_pid;
  __s32 sender_tgid;
  __s32 target_pid;
  __s32 target_tgid;
  char sender_comm[RS_TASK_COMM_LEN];
  char target_comm[RS_TASK_COMM_LEN];
  __u64 target_cgroup_id;
};

/* RS_EV_CORE_DUMP: a process ended by a signal and dumped core. */
struct rs_core_dump {
  struct rs_event_header h;
  __s32 pid; /* The last thread of the process to exit. */
  __s32 tgid;
  __s32 sig;
  __s32 pad;
  char comm[RS_TASK_COMM_LEN];
  __u64 cgroup_id;
};

/* Stalls, measured by the scheduling programs (bpf/stalls.bpf.h) for the
 * `blocked` and `runqueue_delay` triggers, only when one is configured.
 *
 * RS_EV_TASK_BLOCKED: a task that left the CPU in D (uninterruptible) was
 * woken stall_blocked_ns or more later. h.ts_ns: the wakeup; h.cpu: the
 * waker's CPU. The agent's sweep of stall_tasks reports one still blocked
 * (RS_STALL_STILL_BLOCKED) the same way, without a record.
 *
 * RS_EV_RUNQUEUE_DELAY: a runnable task waited stall_runqueue_ns or more on
 * a CPU's run queue before it ran there (from when it was queued there:
 * woken, preempted, or migrated). h.ts_ns: it ran; h.cpu: that CPU. */
enum rs_stall_how {
  RS_STALL_QUEUED = 0,        /* Runqueue: queued there, then waited. */
  RS_STALL_WOKEN = 1,         /* Blocked: woken at last. */
  RS_STALL_STILL_BLOCKED = 2, /* Blocked: not woken yet (the agent's sweep). */
};

struct rs_task_stall {
  struct rs_event_header h;
  __u64 since_ns; /* It blocked, or was queued (CLOCK_BOOTTIME). */
  __u64 cgroup_id;
  __s32 pid;
  __s32 tgid;
  /* Blocked: the waker (0: unknown). Runqueue: the task that ran before it
   * on its CPU. */
  __s32 other_pid;
  /* Blocked: the CPU it blocked on. Runqueue: h.cpu. */
  __s32 cpu;
  __u32 how; /* enum rs_stall_how */
  __u32 pad;
  char comm[RS_TASK_COMM_LEN];
  char other_comm[RS_TASK_COMM_LEN];
};

/* stall_tasks (a hash map by tid, sized by the loader): the tasks blocked
 * in D now, each from the switch that took it off the CPU to its wakeup.
 * The agent's sweep reads it for tasks blocked and never woken. */
enum rs_stall_kind {
  RS_STALL_BLOCKED = 1, /* Off the CPU in D since since_ns. */
};

struct rs_stall_task {
  __u64 since_ns;
  __u64 cgroup_id;             /* RS_STALL_BLOCKED: the task's cgroup v2 id. */
  __s32 tgid;                  /* RS_STALL_BLOCKED. */
  __s32 cpu;                   /* The CPU it blocked on. */
  __u32 kind;                  /* enum rs_stall_kind */
  __u32 how;                   /* Unused: 0. */
  char comm[RS_TASK_COMM_LEN]; /* RS_STALL_BLOCKED. */
};

#endif /* RINGSIDE_BPF_INCIDENT_EVENTS_H_ */
