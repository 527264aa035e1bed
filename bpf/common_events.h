/* What every ringside BPF record has in common, shared by the BPF programs
 * (kernel side) and their C++ consumers: fixed-width fields only, so both
 * sides agree byte for byte. */
#ifndef RINGSIDE_BPF_COMMON_EVENTS_H_
#define RINGSIDE_BPF_COMMON_EVENTS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define RS_TASK_COMM_LEN 16
/* Rings are indexed by CPU; more CPUs than this are not recorded. */
#define RS_MAX_CPUS 1024
/* Entries of the tgid filter (rodata). */
#define RS_MAX_FILTER_TGIDS 16
/* Entries of the cgroup set filter (a hash map user space fills). */
#define RS_MAX_FILTER_CGROUPS 256

enum rs_event_type {
  RS_EV_SCHED_SWITCH = 1,
  RS_EV_SCHED_WAKING = 2,
  RS_EV_SCHED_WAKEUP_NEW = 3,
  RS_EV_SCHED_MIGRATE = 4,
  RS_EV_PROCESS_FORK = 5,
  RS_EV_PROCESS_EXEC = 6,
  RS_EV_PROCESS_EXIT = 7,
  RS_EV_TASK_RENAME = 8,
  RS_EV_OOM_KILL = 9,
  RS_EV_FATAL_SIGNAL = 10,
  RS_EV_CORE_DUMP = 11,
  /* Not an event: scheduling records sent to the ring together
   * (rs_sched_batch); EventSource hands out the records, never the batch. */
  RS_EV_SCHED_BATCH = 12,
  RS_EV_PROCESS_FREE = 13,
  /* A blocked thread's stacks (bpf/stack_events.h): not an ftrace event. */
  RS_EV_STACK_BLOCKED = 14,
  /* A CPU sample's stacks (bpf/stack_events.h): not an ftrace event. */
  RS_EV_STACK_CPU_SAMPLE = 15,
  /* Stalls (bpf/incident_events.h): a task long in D, or long runnable. */
  RS_EV_TASK_BLOCKED = 16,
  RS_EV_RUNQUEUE_DELAY = 17,
  RS_EV_MAX = 18, /* Size of the drop-counter array. */
};

/* Every record starts with this header. */
struct rs_event_header {
  __u16 type; /* enum rs_event_type */
  __u16 size; /* Of the whole record, header included. */
  __u32 cpu;
  __u64 ts_ns; /* bpf_ktime_get_boot_ns(): CLOCK_BOOTTIME. */
};

#endif /* RINGSIDE_BPF_COMMON_EVENTS_H_ */
