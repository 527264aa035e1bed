/* Record layouts shared by the BPF programs (kernel side) and their C++
 * consumers: fixed-width fields only, so both sides agree byte for byte. */
#ifndef RINGSIDE_BPF_SCHED_EVENTS_H_
#define RINGSIDE_BPF_SCHED_EVENTS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define RS_TASK_COMM_LEN 16
/* Rings are indexed by CPU; more CPUs than this are not recorded. */
#define RS_MAX_CPUS 1024

enum rs_event_type {
  RS_EV_SCHED_SWITCH = 1,
  RS_EV_MAX = 16, /* Size of the drop-counter array. */
};

/* Every record starts with this header. */
struct rs_event_header {
  __u16 type; /* enum rs_event_type */
  __u16 size; /* Of the whole record, header included. */
  __u32 cpu;
  __u64 ts_ns; /* bpf_ktime_get_boot_ns(): CLOCK_BOOTTIME. */
};

struct rs_sched_switch {
  struct rs_event_header h;
  __s32 prev_pid;
  __s32 prev_tgid;
  __s32 next_pid;
  __s32 next_tgid;
  __s32 prev_prio;
  __s32 next_prio;
  __s64 prev_state;
  char prev_comm[RS_TASK_COMM_LEN];
  char next_comm[RS_TASK_COMM_LEN];
};

#endif /* RINGSIDE_BPF_SCHED_EVENTS_H_ */
