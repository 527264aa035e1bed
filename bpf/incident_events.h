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

#endif /* RINGSIDE_BPF_INCIDENT_EVENTS_H_ */
