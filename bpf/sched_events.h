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

/* The types a batch counts are those below this: every scheduling record,
 * and the process records that join them (fork, exit, rename, free; not
 * exec, nor the incidents between them). */
#define RS_SCHED_BATCH_TYPES (RS_EV_PROCESS_FREE + 1)

/* Most bytes of records in one batch: 42 sched_switch records. */
#define RS_SCHED_BATCH_BYTES 3360

/* A CPU switching to idle sends its batch when its last idle lasted this
 * long (bpf/sched_batch.bpf.h): a quiet CPU, whose batch would otherwise
 * likely wait for user space's flush (EventSource::kBatchMaxWaitNs). A busy
 * CPU idles for less, and keeps batching. */
#define RS_SCHED_BATCH_LONG_IDLE_NS 10000000ull

/* RS_EV_SCHED_BATCH: this header (its size covers the records that follow,
 * its ts_ns is the first one's), then sched_switch, sched_waking,
 * sched_wakeup_new and sched_migrate_task records of the header's CPU in the
 * order they happened, each with its own header (bpf/sched_batch.bpf.h);
 * in the one object, its sched_process_fork, sched_process_exit,
 * task_rename and sched_process_free records too. */
struct rs_sched_batch {
  struct rs_event_header h;
  __u8 data[RS_SCHED_BATCH_BYTES];
};

/* A CPU's batch as its programs keep it (a PERCPU_ARRAY value); user space
 * reads `records` of an offline CPU (EventSource::records_waiting). */
struct rs_sched_batch_state {
  __u32 used;                          /* Bytes of records in batch.data. */
  __u32 busy;                          /* Set while a program or the flush changes the batch. */
  __u32 records[RS_SCHED_BATCH_TYPES]; /* Per type (index: type) in the batch. */
  __u64 idle_at_ns;  /* When the CPU last switched to idle (as recorded); 0: not yet. */
  __u64 idle_for_ns; /* How long its last idle lasted, to the switch out of it. */
  struct rs_sched_batch batch;
};

/* RS_EV_SCHED_WAKING (sched_waking: the waker starts waking `pid`, on the
 * waker's CPU, before the wakee is queued) and RS_EV_SCHED_WAKEUP_NEW (a
 * new task made runnable): the waker is the task that ran it. target_cpu
 * is task_cpu(pid) at that moment, as the tracepoints report it. */
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
