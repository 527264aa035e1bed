/* Process lifecycle records (bpf/process.bpf.c). */
#ifndef RINGSIDE_BPF_PROCESS_EVENTS_H_
#define RINGSIDE_BPF_PROCESS_EVENTS_H_

#include "bpf/common_events.h"

#define RS_FILENAME_LEN 256
/* The first bytes of the argument block (NUL-separated arguments). */
#define RS_ARGV_LEN 256

/* RS_EV_PROCESS_FORK: a new task; a thread when child_pid != child_tgid. */
struct rs_process_fork {
  struct rs_event_header h;
  __s32 parent_pid;
  __s32 parent_tgid;
  __s32 child_pid;
  __s32 child_tgid;
  char parent_comm[RS_TASK_COMM_LEN];
  char child_comm[RS_TASK_COMM_LEN];
};

/* RS_EV_PROCESS_EXEC: `pid` ran execve successfully. */
struct rs_process_exec {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 old_pid; /* Differs from pid when a non-leader thread exec'd. */
  __s32 ppid;    /* tgid of the real parent. */
  __u32 uid;
  __u32 gid;
  __u16 filename_len; /* Bytes of filename, without the NUL. */
  __u16 argv_len;     /* Bytes of argv used. */
  __u32 pad;
  __u64 cgroup_id;             /* The task's cgroup v2 id (inode number of its directory). */
  char comm[RS_TASK_COMM_LEN]; /* The new comm (basename of the file). */
  char filename[RS_FILENAME_LEN];
  char argv[RS_ARGV_LEN];
};

/* RS_EV_PROCESS_EXIT: a task exits; group_dead when it was the last thread
 * of its process. exit_code as wait(2) encodes it (code << 8, or the signal
 * with 0x80 set when it dumped core). */
struct rs_process_exit {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 exit_code;
  __u32 group_dead;
  char comm[RS_TASK_COMM_LEN];
};

/* RS_EV_TASK_RENAME: comm changed (prctl(PR_SET_NAME), pthread_setname_np). */
struct rs_task_rename {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  char old_comm[RS_TASK_COMM_LEN];
  char new_comm[RS_TASK_COMM_LEN];
};

/* RS_EV_PROCESS_FREE: a dead task's last reference is gone (its
 * task_struct is freed, in an RCU callback): from here on its pid may be
 * reused. */
struct rs_process_free {
  struct rs_event_header h;
  __s32 pid; /* The task freed. */
  __s32 tgid;
  __s32 prio;
  __s32 current_pid; /* The task the RCU callback ran in, as ftrace's common_pid. */
  char comm[RS_TASK_COMM_LEN];
};

#endif /* RINGSIDE_BPF_PROCESS_EVENTS_H_ */
