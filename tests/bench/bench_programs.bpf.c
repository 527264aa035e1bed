// SPDX-License-Identifier: GPL-2.0
/* Programs for the bpf/ benchmarks only: a filler that writes sched_switch
 * records into the shared rings at kernel speed (run with
 * BPF_PROG_TEST_RUN on a chosen CPU), and an empty sched_switch program
 * whose cost is the baseline for ours. */
#include "bpf/rings.bpf.h"

#include "bpf/sched.bpf.h"

static long fill_one(__u32 i, void* ctx) {
  void* ring;
  struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e), &ring);
  if (!e) return 1;
  e->prev_pid = i;
  e->prev_tgid = i;
  e->next_pid = i + 1;
  e->next_tgid = i + 1;
  e->prev_prio = 120;
  e->next_prio = 120;
  e->prev_state = 1;
  __builtin_memset(e->prev_comm, 'a', RS_TASK_COMM_LEN);
  __builtin_memset(e->next_comm, 'b', RS_TASK_COMM_LEN);
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
  return 0;
}

/* args[0]: how many records. */
SEC("raw_tp")
int fill_ring(struct bpf_raw_tracepoint_args* ctx) {
  bpf_loop((__u32)ctx->args[0], fill_one, NULL, 0);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(empty_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return 0;
}

/* The wakeup's own baseline: a wakeup often runs on a CPU coming out of
 * idle, or touches a task last run on another CPU, so its empty program
 * already pays cold caches that a switch's does not. */
SEC("tp_btf/sched_waking")
int BPF_PROG(empty_sched_waking, struct task_struct* p) { return 0; }

/* Steps of handle_sched_switch on their own, to see where its time goes.
 * They write into the shared per-CPU rings, which the benchmark drains as it
 * drains ours: a ring nobody reads fills at once, and a step would then time
 * a failing reserve. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_clock, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return bpf_ktime_get_boot_ns() == 0;
}

/* The same read on the wakeup's tracepoint: the floor of a wakeup record. */
SEC("tp_btf/sched_waking")
int BPF_PROG(step_wakeup_clock, struct task_struct* p) { return bpf_ktime_get_boot_ns() == 0; }

/* The same read on a kprobe on finish_task_switch() (BM_VsClock attaches
 * it there): the floor of resume_blocked, which takes blocked threads'
 * stacks as they run again. */
SEC("kprobe")
int clock_resume(struct pt_regs* ctx) { return bpf_ktime_get_boot_ns() == 0; }

/* The current CPU's ring, a record reserved and submitted, no clock. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_reserve_submit, bool preempt, struct task_struct* prev,
             struct task_struct* next) {
  __u32 cpu = bpf_get_smp_processor_id();
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring) return 0;
  struct rs_event_header* h = bpf_ringbuf_reserve(ring, sizeof(struct rs_sched_switch), 0);
  if (!h) return 0;
  h->type = RS_EV_SCHED_SWITCH;
  h->size = sizeof(struct rs_sched_switch);
  h->cpu = cpu;
  h->ts_ns = 0;
  bpf_ringbuf_submit(h, BPF_RB_NO_WAKEUP);
  return 0;
}

/* rs_submit's fill query alone. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_query, bool preempt, struct task_struct* prev, struct task_struct* next) {
  __u32 cpu = bpf_get_smp_processor_id();
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring) return 0;
  return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) > ring_wakeup_bytes;
}

/* A record's fixed cost (rs_reserve: the ring, the reserve, the clock; then
 * the submit) on either tracepoint: what is left of a program's cost once
 * its field reads and the fill query are taken away. */
static __always_inline int minimal_record(__u32 type, __u32 size) {
  void* ring;
  struct rs_event_header* h = rs_reserve(type, size, &ring);
  if (!h) return 0;
  bpf_ringbuf_submit(h, BPF_RB_NO_WAKEUP);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_minimal, bool preempt, struct task_struct* prev,
             struct task_struct* next) {
  return minimal_record(RS_EV_SCHED_SWITCH, sizeof(struct rs_sched_switch));
}

SEC("tp_btf/sched_waking")
int BPF_PROG(step_wakeup_minimal, struct task_struct* p) {
  return minimal_record(RS_EV_SCHED_WAKING, sizeof(struct rs_sched_wakeup));
}

/* handle_sched_switch without its comm copies and fill query, then without
 * the fill query only: what the field reads and the query add to the
 * minimal record. */
static __always_inline int switch_record(bool preempt, struct task_struct* prev,
                                         struct task_struct* next, unsigned int prev_state,
                                         bool comms) {
  void* ring;
  struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e), &ring);
  if (!e) return 0;
  rs_fill_switch_tasks(false, e, preempt, prev, next, prev_state, RS_TASK_STATE_RULES_NEWEST);
  if (comms) {
    rs_fill_switch_comms(false, e, prev, next);
  } else {
    __builtin_memset(e->prev_comm, 0, 2 * RS_TASK_COMM_LEN);
  }
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_fields, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  return switch_record(preempt, prev, next, prev_state, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_no_query, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  return switch_record(preempt, prev, next, prev_state, true);
}

/* A clock without an ordered TSC read: the time a per-CPU software perf
 * event (PERF_COUNT_SW_DUMMY, opened by the benchmark on every CPU) has been
 * enabled, which perf computes from local_clock() (sched_clock: an
 * unordered TSC read). A clock of its own, offset from CLOCK_BOOTTIME per
 * CPU; timed to see whether it is cheaper than bpf_ktime_get_boot_ns(). */
struct {
  __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(__u32));
} clock_events SEC(".maps");

/* Reads of clock_events that failed: a step that fails times nothing. */
__u64 perf_clock_failures = 0;

static __always_inline __u64 rs_bench_perf_clock(void) {
  struct bpf_perf_event_value v;
  if (bpf_perf_event_read_value(&clock_events, BPF_F_CURRENT_CPU, &v, sizeof(v)) != 0) {
    __sync_fetch_and_add(&perf_clock_failures, 1);
    return 0;
  }
  return v.enabled;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_clock_perf, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return rs_bench_perf_clock() == 0;
}

/* The batching design, timed before anyone builds it: the whole switch
 * record (clock, fields, comms) written into a per-CPU batch, and the batch
 * copied into the CPU's ring with one bpf_ringbuf_output once full. Safe
 * only for programs that cannot interrupt each other on a CPU (the
 * scheduler's tracepoints all run with interrupts off), and it leaves up to
 * a batch of records out of the ring until the next flush. */
#define BATCH_RECORDS 42
#define BATCH_BYTES (BATCH_RECORDS * sizeof(struct rs_sched_switch))

struct switch_batch {
  __u32 used;
  __u32 pad;
  __u8 data[BATCH_BYTES];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct switch_batch);
} switch_batches SEC(".maps");

/* A switch record into the CPU's batch, stamped with `rq`'s clock, or
 * with our own read of CLOCK_BOOTTIME (as rs_reserve) without one. */
static __always_inline int batched_switch(bool preempt, struct task_struct* prev,
                                          struct task_struct* next, unsigned int prev_state,
                                          struct rq* rq, bool perf_clock) {
  const __u32 zero = 0;
  struct switch_batch* b = bpf_map_lookup_elem(&switch_batches, &zero);
  if (!b) return 0;
  __u32 used = b->used;
  if (used > BATCH_BYTES - sizeof(struct rs_sched_switch)) {
    __u32 cpu = bpf_get_smp_processor_id();
    void* ring = bpf_map_lookup_elem(&rings, &cpu);
    if (!ring || bpf_ringbuf_output(ring, b->data, BATCH_BYTES, BPF_RB_NO_WAKEUP) != 0) {
      rs_count_drop(RS_EV_SCHED_SWITCH);
    }
    used = 0;
  }
  struct rs_sched_switch* e = (struct rs_sched_switch*)(b->data + used);
  e->h.type = RS_EV_SCHED_SWITCH;
  e->h.size = sizeof(*e);
  e->h.cpu = 0;
  e->h.ts_ns = rq ? rq->clock : perf_clock ? rs_bench_perf_clock() : bpf_ktime_get_boot_ns();
  rs_fill_switch_tasks(false, e, preempt, prev, next, prev_state, RS_TASK_STATE_RULES_NEWEST);
  rs_fill_switch_comms(false, e, prev, next);
  b->used = used + sizeof(*e);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_batched, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  return batched_switch(preempt, prev, next, prev_state, NULL, false);
}

/* The same with the time the scheduler took for this switch (the run
 * queue's clock: sched_clock, an unordered TSC read) instead of a
 * CLOCK_BOOTTIME read of our own, which on x86 is an ordered one (rdtscp)
 * that waits for the switch's own work to retire. A different clock, which
 * drifts from CLOCK_BOOTTIME: using it would take conversion points taken
 * on every CPU. Timed to see what our clock read costs. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_batched_rq_clock, bool preempt, struct task_struct* prev,
             struct task_struct* next, unsigned int prev_state) {
  /* The switch's run queue through a task's group run queue (the
   * runqueues per-CPU symbol is not in this kernel's kallsyms). */
  struct cfs_rq* cfs_rq = prev->se.cfs_rq ? prev->se.cfs_rq : next->se.cfs_rq;
  if (!cfs_rq || !cfs_rq->rq) return 0;
  return batched_switch(preempt, prev, next, prev_state, cfs_rq->rq, false);
}

/* The batch again, stamped with the perf event's clock. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_batched_perf_clock, bool preempt, struct task_struct* prev,
             struct task_struct* next, unsigned int prev_state) {
  return batched_switch(preempt, prev, next, prev_state, NULL, true);
}

/* A ring of our own instead of the kernel's BPF ringbuf, for the programs
 * that run with interrupts off (the scheduler's tracepoints) and so never
 * run twice at once on a CPU: one writer per CPU's slots, no lock, no
 * reserve/commit, the record written straight into an mmap-able array user
 * space reads; the head published with an atomic add (a full barrier). The
 * step does not drop on a full ring (nobody consumes it): it reads the
 * consumer's position as a real one would and counts. */
#define LOCKLESS_SLOTS 4096 /* Per CPU, a power of two. */
#define LOCKLESS_CPUS 64

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, LOCKLESS_CPUS* LOCKLESS_SLOTS);
  __type(key, __u32);
  __type(value, struct rs_sched_switch);
} lockless_slots SEC(".maps");

/* Per CPU, one cache line: [0] the head (records written), [1] the tail
 * (records the consumer is done with), [2] records found the ring full. */
__u64 lockless_positions[LOCKLESS_CPUS * 8] = {};

static __always_inline void* lockless_slot(__u32 type, __u32 size, __u32 cpu) {
  if (cpu >= LOCKLESS_CPUS) return NULL;
  __u64* pos = &lockless_positions[cpu * 8];
  const __u64 head = pos[0];
  if (head - pos[1] >= LOCKLESS_SLOTS) pos[2]++;
  __u32 index = cpu * LOCKLESS_SLOTS + (__u32)(head & (LOCKLESS_SLOTS - 1));
  struct rs_event_header* h = bpf_map_lookup_elem(&lockless_slots, &index);
  if (!h) return NULL;
  h->type = type;
  h->size = size;
  h->cpu = cpu;
  h->ts_ns = bpf_ktime_get_boot_ns();
  return h;
}

static __always_inline void lockless_publish(__u32 cpu) {
  if (cpu < LOCKLESS_CPUS) __sync_fetch_and_add(&lockless_positions[cpu * 8], 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_switch_lockless, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  const __u32 cpu = bpf_get_smp_processor_id();
  struct rs_sched_switch* e = lockless_slot(RS_EV_SCHED_SWITCH, sizeof(*e), cpu);
  if (!e) return 0;
  rs_fill_switch_tasks(false, e, preempt, prev, next, prev_state, RS_TASK_STATE_RULES_NEWEST);
  rs_fill_switch_comms(false, e, prev, next);
  lockless_publish(cpu);
  return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(step_wakeup_lockless, struct task_struct* p) {
  const __u32 cpu = bpf_get_smp_processor_id();
  struct rs_sched_wakeup* e = lockless_slot(RS_EV_SCHED_WAKING, sizeof(*e), cpu);
  if (!e) return 0;
  rs_fill_wakeup(false, e, p);
  lockless_publish(cpu);
  return 0;
}

/* The clock alone on the tracepoints of the process programs and of the
 * rarer scheduling ones: the floor of each of ours on its own tracepoint
 * (BM_VsClock). */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(clock_sched_wakeup_new, struct task_struct* p) { return bpf_ktime_get_boot_ns() == 0; }

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(clock_sched_migrate_task, struct task_struct* p, int dest_cpu) {
  return bpf_ktime_get_boot_ns() == 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(clock_process_fork, struct task_struct* parent, struct task_struct* child) {
  return bpf_ktime_get_boot_ns() == 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(clock_process_exit, struct task_struct* p) { return bpf_ktime_get_boot_ns() == 0; }

SEC("tp_btf/sched_process_free")
int BPF_PROG(clock_process_free, struct task_struct* p) { return bpf_ktime_get_boot_ns() == 0; }
