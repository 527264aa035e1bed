/* Each CPU's batch of records on their way to its ring (bpf/sched.bpf.c's
 * scheduling programs, and the process programs of the one object that
 * holds both groups, bpf/all.bpf.c). */
#ifndef RINGSIDE_BPF_SCHED_BATCH_BPF_H_
#define RINGSIDE_BPF_SCHED_BATCH_BPF_H_

#include "bpf/process_events.h"
#include "bpf/rings.bpf.h"
#include "bpf/sched_events.h"

/* Bytes of records per batch (at most RS_SCHED_BATCH_BYTES), set by the
 * loader to fit the ring; 0: every record reserved in the ring on its own. */
const volatile __u32 sched_batch_bytes = 0;

/* Each CPU's scheduling and process records not yet in its ring, in the
 * order they happened. One bpf_ringbuf_output per batch instead of a
 * reserve (a spinlock with interrupts saved), a fill query and a commit per
 * record: on the pinned ping-pong of BM_KernelCost the switch program
 * measured 2.6 times the empty one instead of 3.8, the wakeup program 3.2
 * instead of 4.4, against 2.4 for a bare clock read. The fork, exit, free
 * and rename programs join them in the one object (RS_BATCH_PROCESS_RECORDS,
 * bpf/all.bpf.c); an exec's record is too large, and goes to the ring.
 *
 * Only programs on this CPU touch its batch: the switch, wakeup, migrate
 * and process programs, and flush_sched_batch, which user space runs on the
 * CPU with BPF_PROG_TEST_RUN (in an IPI, or with preemption off on its own
 * CPU). Most of them run with interrupts off, but not all (a task waking
 * itself, the flush on the caller's CPU), so one may interrupt another:
 * whoever changes the batch sets `busy` first (same CPU: program order is
 * enough), and a program that finds it set records straight into the ring
 * instead, while the flush says so and is run again. A program never
 * interrupts itself (the kernel skips such a run and counts it missed). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rs_sched_batch_state);
} sched_batches SEC(".maps");

/* Per CPU, one cache line each (CPUs never write a shared one): the time
 * of the oldest record waiting in the CPU's batch, 0 when none. User space
 * reads it in place to flush only the batches that have waited long
 * (EventSource::Poll). Aligned so that no CPU's writes share a line with
 * `stopping`, which every program reads. */
__u64 batch_waiting[RS_MAX_CPUS * 8] __attribute__((aligned(64))) = {};
/* Keeps whatever the compiler puts after the array off CPU 1023's line. */
__u64 batch_waiting_end[8] __attribute__((aligned(64))) = {};

/* What a batch relies on: a switch is the largest record it holds (a batch
 * is sent once another switch would not fit), and every record keeps the
 * next one 8-byte aligned (the consumer reads them in place). */
_Static_assert(sizeof(struct rs_sched_wakeup) <= sizeof(struct rs_sched_switch) &&
                   sizeof(struct rs_sched_migrate) <= sizeof(struct rs_sched_switch) &&
                   sizeof(struct rs_process_fork) <= sizeof(struct rs_sched_switch) &&
                   sizeof(struct rs_process_exit) <= sizeof(struct rs_sched_switch) &&
                   sizeof(struct rs_process_free) <= sizeof(struct rs_sched_switch) &&
                   sizeof(struct rs_task_rename) <= sizeof(struct rs_sched_switch),
               "the switch is the largest batched record");
_Static_assert(sizeof(struct rs_sched_switch) % 8 == 0 && sizeof(struct rs_sched_wakeup) % 8 == 0 &&
                   sizeof(struct rs_sched_migrate) % 8 == 0 &&
                   sizeof(struct rs_process_fork) % 8 == 0 &&
                   sizeof(struct rs_process_exit) % 8 == 0 &&
                   sizeof(struct rs_process_free) % 8 == 0 &&
                   sizeof(struct rs_task_rename) % 8 == 0,
               "batched records are whole multiples of 8 bytes");
_Static_assert(RS_EV_PROCESS_FORK < RS_SCHED_BATCH_TYPES &&
                   RS_EV_PROCESS_EXIT < RS_SCHED_BATCH_TYPES &&
                   RS_EV_PROCESS_FREE < RS_SCHED_BATCH_TYPES &&
                   RS_EV_TASK_RENAME < RS_SCHED_BATCH_TYPES,
               "a batch counts every type it holds");

#define rs_barrier() asm volatile("" ::: "memory")

/* The CPU's slot in batch_waiting. The mask bounds the index by itself:
 * verifiers before 6.2 or so lose the bound of `cpu < RS_MAX_CPUS` once the
 * compiler has shifted a copy of cpu ("R2 unbounded memory access" on
 * Debian's 6.1). RS_MAX_CPUS is a power of two. */
#define rs_batch_waiting_slot(cpu) (batch_waiting[((cpu) & (RS_MAX_CPUS - 1)) * 8])
_Static_assert((RS_MAX_CPUS & (RS_MAX_CPUS - 1)) == 0, "RS_MAX_CPUS is a power of two");

/* Copies the CPU's batch into its ring, or counts its records dropped.
 * The caller holds `busy`. Returns 0.
 *
 * A function of its own (a BPF-to-BPF call), not inlined: it runs once per
 * few dozen records, but inlined, its unrolled loops made every program
 * that may send a batch 4.5 KB of machine code instead of 2.8, and the
 * rarer programs ran it cold. Out of line, BM_VsClock's fork loop measured
 * a migration at 1.3-1.7 times the clock-only program instead of 2.3-2.7,
 * a new task's wakeup 1.8-1.9 instead of 2.0, an exit 1.7 instead of 1.9. */
static __noinline int output_sched_batch(struct rs_sched_batch_state* s) {
  /* 64-bit: a bound the verifier checks on a 32-bit copy is lost. */
  __u64 used = s->used;
  if (used == 0) return 0;
  if (used > RS_SCHED_BATCH_BYTES) used = RS_SCHED_BATCH_BYTES;
  __u32 cpu = bpf_get_smp_processor_id();
  if (cpu < RS_MAX_CPUS) rs_batch_waiting_slot(cpu) = 0;
  /* Each type's count, for the drops should the ring refuse the batch. */
  __u32 records[RS_SCHED_BATCH_TYPES];
  /* Unrolled: constant indices (a variable stack offset needs 5.12+). */
#pragma unroll
  for (__u32 t = RS_EV_SCHED_SWITCH; t < RS_SCHED_BATCH_TYPES; t++) {
    records[t] = s->records[t];
    s->records[t] = 0;
  }
  s->used = 0;
  {
    /* Sent or dropped below: seen either way. One lookup for the batch. */
    const __u32 zero = 0;
    struct rs_seen_counts* n = bpf_map_lookup_elem(&seen, &zero);
    if (n) {
      /* Every type, 0 or not: a branch a type, fourteen of them, is more
       * paths than the verifier walks (a million instructions). */
#pragma unroll
      for (__u32 t = RS_EV_SCHED_SWITCH; t < RS_SCHED_BATCH_TYPES; t++) {
        __sync_fetch_and_add(&n->records[t], records[t]);
      }
    }
  }
  const __u64 size = sizeof(struct rs_event_header) + used;
  s->batch.h.type = RS_EV_SCHED_BATCH;
  s->batch.h.size = size;
  s->batch.h.cpu = cpu;
  s->batch.h.ts_ns = ((struct rs_event_header*)s->batch.data)->ts_ns;
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring || bpf_ringbuf_output(ring, &s->batch, size, rs_wakeup_flag(ring)) != 0) {
#pragma unroll
    for (__u32 t = RS_EV_SCHED_SWITCH; t < RS_SCHED_BATCH_TYPES; t++) {
      rs_count_drops(t, records[t]);
    }
  }
  return 0;
}

/* The CPU's batch, now `busy`, for one record; NULL when records go
 * straight into the ring: batching off, recording stopped (rs_reserve
 * counts that), or the batch busy (this program interrupted another). */
static __always_inline struct rs_sched_batch_state* take_sched_batch(__u32 type) {
  if (sched_batch_bytes == 0 || type >= RS_EV_MAX || stopping[type]) return NULL;
  const __u32 zero = 0;
  struct rs_sched_batch_state* s = bpf_map_lookup_elem(&sched_batches, &zero);
  if (!s || s->busy) return NULL;
  s->busy = 1;
  rs_barrier();
  return s;
}

/* Room for a record of `type` in a taken batch, its header filled. */
static __always_inline void* batch_record(struct rs_sched_batch_state* s, __u32 type, __u32 size) {
  __u32 used = s->used;
  if (used > RS_SCHED_BATCH_BYTES - sizeof(struct rs_sched_switch)) { /* Never: sent once full. */
    output_sched_batch(s);
    used = 0;
  }
  struct rs_event_header* h = (struct rs_event_header*)(s->batch.data + used);
  h->type = type;
  h->size = size;
  h->cpu = bpf_get_smp_processor_id();
  h->ts_ns = bpf_ktime_get_boot_ns();
  return h;
}

/* Whether the CPU's ring has room now for its batch of `used` bytes (with
 * the batch's header and the ring's own). */
static __noinline bool sched_batch_fits_ring(__u32 cpu, __u64 used) {
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring) return false;
  const __u64 record = sizeof(struct rs_event_header) + used + BPF_RINGBUF_HDR_SZ;
  return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) + record <=
         bpf_ringbuf_query(ring, BPF_RB_RING_SIZE);
}

/* Adds the record batch_record() gave, sends the batch once another switch
 * would not fit, and gives the batch back.
 *
 * A switch to the idle task sends the batch too when the CPU's last idle
 * lasted RS_SCHED_BATCH_LONG_IDLE_NS (a quiet CPU, likely to idle long
 * again) and its ring has room. Kept, the batch would wait for user
 * space's flush (EventSource::Poll): an IPI that wakes the idle CPU (on a
 * VM, a halted vCPU the hypervisor must run) while the flushing thread
 * spins until it is done. A busy CPU idles briefly and keeps batching: sent
 * at its every switch to idle, batches cost BM_VsClock's fork loop ~150 ns
 * a switch. Without room the batch stays, for the drain that reads the ring
 * first (EventSource::Drain): sent now, it would be dropped. */
static __always_inline void commit_batch_record(struct rs_sched_batch_state* s,
                                                struct rs_event_header* h, __u32 type) {
  const __u32 used = s->used + h->size;
  s->used = used;
  if (type < RS_SCHED_BATCH_TYPES) s->records[type]++;
  const __u32 cpu = h->cpu;
  if (used == h->size && cpu < RS_MAX_CPUS) rs_batch_waiting_slot(cpu) = h->ts_ns;
  bool send = used + sizeof(struct rs_sched_switch) > sched_batch_bytes;
  /* `type` is a constant where this is inlined: only switches look. */
  if (type == RS_EV_SCHED_SWITCH) {
    const struct rs_sched_switch* e = (const struct rs_sched_switch*)h;
    if (e->prev_pid == 0 && s->idle_at_ns != 0) s->idle_for_ns = h->ts_ns - s->idle_at_ns;
    if (e->next_pid == 0) {
      s->idle_at_ns = h->ts_ns;
      if (!send && s->idle_for_ns >= RS_SCHED_BATCH_LONG_IDLE_NS) {
        send = sched_batch_fits_ring(cpu, used);
      }
    }
  }
  if (send) output_sched_batch(s);
  rs_barrier();
  s->busy = 0;
}

#endif /* RINGSIDE_BPF_SCHED_BATCH_BPF_H_ */
