// SPDX-License-Identifier: GPL-2.0
/* Scheduling: who ran where. */
#include "bpf/sched.bpf.h"
#include "bpf/rings.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* RS_TASK_STATE_RULE_* of the running kernel, set by the loader. */
const volatile __u32 task_state_rules = RS_TASK_STATE_RULES_NEWEST;

/* Switches per batch (at most RS_SWITCH_BATCH_MAX), set by the loader to
 * fit the ring; 0: every switch reserved in the ring on its own. */
const volatile __u32 switch_batch_records = 0;

/* Each CPU's switches not yet in its ring. sched_switch runs with
 * interrupts off and the run queue locked, so on one CPU no two runs of
 * handle_sched_switch overlap and nothing else touches the batch but
 * flush_switch_batch, which runs on the same CPU with interrupts or
 * preemption off (BPF_PROG_TEST_RUN). One bpf_ringbuf_output per batch
 * instead of a reserve, a fill query and a commit per switch: the program
 * measured 2.8 times the empty one instead of 4.0 (BM_KernelCost), close
 * to the 2.4 of a bare clock read. */
struct rs_switch_batch_state {
  __u32 used; /* Records in `batch`. */
  __u32 pad;
  struct rs_switch_batch batch;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rs_switch_batch_state);
} switch_batches SEC(".maps");

/* Per CPU, one cache line each (CPUs never write a shared one): [0] the
 * time of the oldest switch waiting in the CPU's batch, 0 when none; [1]
 * how many wait. User space reads them in place to flush only the batches
 * that have waited long (EventSource::Poll), and to count the switches of
 * a CPU that went offline with a batch. Aligned so that no CPU's writes
 * share a line with `stopping`, which every program reads. */
__u64 batch_waiting[RS_MAX_CPUS * 8] __attribute__((aligned(64))) = {};
/* Keeps whatever the compiler puts after the array off CPU 1023's line. */
__u64 batch_waiting_end[8] __attribute__((aligned(64))) = {};

/* Copies the CPU's batch into its ring, or counts its switches dropped. */
static __always_inline void output_switch_batch(struct rs_switch_batch_state* s) {
  __u32 n = s->used;
  if (n == 0) return;
  if (n > RS_SWITCH_BATCH_MAX) n = RS_SWITCH_BATCH_MAX;
  const __u32 size = sizeof(struct rs_event_header) + n * sizeof(struct rs_sched_switch);
  __u32 cpu = bpf_get_smp_processor_id();
  if (cpu < RS_MAX_CPUS) {
    batch_waiting[cpu * 8] = 0;
    batch_waiting[cpu * 8 + 1] = 0;
  }
  s->batch.h.type = RS_EV_SCHED_SWITCH_BATCH;
  s->batch.h.size = size;
  s->batch.h.cpu = cpu;
  s->batch.h.ts_ns = s->batch.records[0].h.ts_ns;
  s->used = 0;
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring || bpf_ringbuf_output(ring, &s->batch, size, rs_wakeup_flag(ring)) != 0) {
    rs_count_drops(RS_EV_SCHED_SWITCH, n);
  }
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  if (rs_filters_on() && !rs_task_selected(prev) && !rs_task_selected(next)) return 0;
  if (switch_batch_records == 0) {
    void* ring;
    struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e), &ring);
    if (!e) return 0;
    rs_fill_switch_tasks(e, preempt, prev, next, prev_state, task_state_rules);
    rs_fill_switch_comms(e, prev, next);
    rs_submit(ring, e);
    return 0;
  }
  if (stopping) {
    __sync_fetch_and_add(&outside_window[RS_EV_SCHED_SWITCH], 1);
    return 0;
  }
  const __u32 zero = 0;
  struct rs_switch_batch_state* s = bpf_map_lookup_elem(&switch_batches, &zero);
  if (!s) {
    rs_count_drop(RS_EV_SCHED_SWITCH);
    return 0;
  }
  const __u32 n = s->used;
  if (n >= RS_SWITCH_BATCH_MAX) { /* Never: flushed once full. */
    output_switch_batch(s);
    return 0;
  }
  struct rs_sched_switch* e = &s->batch.records[n];
  e->h.type = RS_EV_SCHED_SWITCH;
  e->h.size = sizeof(*e);
  const __u32 cpu = bpf_get_smp_processor_id();
  e->h.cpu = cpu;
  e->h.ts_ns = bpf_ktime_get_boot_ns();
  rs_fill_switch_tasks(e, preempt, prev, next, prev_state, task_state_rules);
  rs_fill_switch_comms(e, prev, next);
  s->used = n + 1;
  if (cpu < RS_MAX_CPUS) {
    if (n == 0) batch_waiting[cpu * 8] = e->h.ts_ns;
    batch_waiting[cpu * 8 + 1] = n + 1;
  }
  if (n + 1 >= switch_batch_records) output_switch_batch(s);
  return 0;
}

/* Sends the current CPU's batch to its ring: run by user space with
 * BPF_PROG_TEST_RUN on a CPU whose batch it wants now (EventSource's
 * Drain, and Poll for batches that waited long). Never attached. */
SEC("raw_tp")
int flush_switch_batch(void* ctx) {
  const __u32 zero = 0;
  struct rs_switch_batch_state* s = bpf_map_lookup_elem(&switch_batches, &zero);
  if (s) output_switch_batch(s);
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
