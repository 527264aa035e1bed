// SPDX-License-Identifier: GPL-2.0
/* Scheduling: who ran where. */
#include "bpf/sched.bpf.h"
#include "bpf/rings.bpf.h"
#include "bpf/sched_batch.bpf.h"
#include "bpf/stack_events.h"
#include "bpf/stalls.bpf.h"

/* RS_TASK_STATE_RULE_* of the running kernel, set by the loader. */
const volatile __u32 task_state_rules = RS_TASK_STATE_RULES_NEWEST;

/* --- Stacks of threads that block, and CPU samples ----------------------
 * When a switch takes a thread off the CPU in a sleeping state, the time
 * and its state wait in `blocked_tasks`. When it runs again, the first
 * thing it runs is finish_task_switch(), in its own context: a kprobe there
 * (resume_blocked) knows how long it was off, and takes its kernel stack
 * (still where it waited) and its user stack (its registers as it entered
 * the kernel), for every block as long as the sampling period and for a
 * share of the shorter ones: the period's worth of the time they blocked,
 * so that short sleeps cost little and their time is still accounted for.
 * On a kernel without kprobes (stacks_at_switch), the switch takes both
 * stacks of every block as the thread leaves, keeps them in `blocked_tasks`
 * and writes the record when it runs again: dearer, and every block.
 * Each record carries its frames (bpf_get_stack); the agent de-duplicates
 * them. */

#define RS_BLOCKED_STATES (RS_TASK_REPORT | RS_TASK_REPORT_IDLE)

/* RS_STACKS_* (stack_events.h), set by the loader; 0: off. */
const volatile __u32 stack_flags = 0;
/* Bytes of frames taken per stack: max_depth * 8, set by the loader. */
const volatile __u32 stack_bytes = 32 * 8;
/* Blocks shorter than this are sampled (rs_stack_blocked); 0: none is. */
const volatile __u64 blocked_period_ns = 0;
/* Blocked threads' stacks taken by the switch, as they leave. */
const volatile bool stacks_at_switch = false;

/* By tid, one entry per thread that blocked, from its first block to its
 * exit: the record of its last block as far as it is known (h.ts_ns, h.cpu,
 * state; h.ts_ns 0 once it ran again; with stacks_at_switch its pid, tgid
 * and stacks too, the loader sizing the value for two stacks). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* The loader sizes it. */
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(struct rs_stack_blocked));
} blocked_tasks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, RS_STACK_LOSS_MAX);
  __type(key, __u32);
  __type(value, __u64);
} stack_losses SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, RS_BLOCKED_UNSAMPLED_MAX);
  __type(key, __u32);
  __type(value, __u64);
} blocked_unsampled SEC(".maps");

/* Where a stack record is built before it is copied into the ring, per CPU
 * and per program (0: resume_blocked, 1: sample_cpu_stack), so that the
 * sampler interrupting a kprobe never writes over its record. */
struct rs_stack_scratch {
  __u8 bytes[RS_STACK_RECORD_MAX];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct rs_stack_scratch);
} stack_scratch SEC(".maps");

static __always_inline void add_percpu(void* map, __u32 key, __u64 n) {
  __u64* v = bpf_map_lookup_elem(map, &key);
  if (v) __sync_fetch_and_add(v, n);
}

static __always_inline void count_stack_loss(__u32 kind) { add_percpu(&stack_losses, kind, 1); }

/* Takes one stack into `out` (`size` bytes at most, stack_bytes or less);
 * returns the bytes written (a multiple of 8) and sets *status. */
static __always_inline __u32 take_stack(void* ctx, void* out, __u32 size, bool user,
                                        __s16* status) {
  const long n = bpf_get_stack(ctx, out, size, user ? BPF_F_USER_STACK : 0);
  if (n < 0) {
    *status = (__s16)n;
    if (!user) {
      count_stack_loss(RS_STACK_LOSS_KERNEL_FAILED);
    } else {
      count_stack_loss(n == -14 /* EFAULT */ ? RS_STACK_LOSS_USER_FAULT
                                             : RS_STACK_LOSS_USER_FAILED);
    }
    return 0;
  }
  *status = RS_STACK_TAKEN;
  __u32 bytes = (__u32)n & ~7u;
  if (bytes > RS_STACK_MAX_DEPTH * 8) bytes = RS_STACK_MAX_DEPTH * 8; /* For the verifier. */
  if (bytes >= size) count_stack_loss(RS_STACK_LOSS_TRUNCATED);
  return bytes;
}

/* Fills the kernel and user stacks after a record's fixed part at `frames`
 * (both sized for RS_STACK_MAX_DEPTH) and returns their bytes. A kernel
 * stack of none (a CPU sample in user mode) is RS_STACK_NOT_ASKED.
 *
 * `entry_caller`, when not 0, is the return address of a function whose
 * first instruction the program probes, which the kernel's unwinder does
 * not see: it goes second, after the probed function. On arm64 a function
 * saves its frame record (and with it the link register) only in its
 * prologue, so a walk of the frame records from its entry starts at its
 * caller's record and skips the caller itself (finish_task_switch's
 * stack went straight to schedule(), without __schedule()). */
static __always_inline __u32 take_stacks(void* ctx, __u64* frames, bool has_mm, __u64 entry_caller,
                                         __u16* kernel_frames, __u16* user_frames,
                                         __s16* kernel_status, __s16* user_status) {
  __u32 k = 0, u = 0;
  *kernel_status = RS_STACK_NOT_ASKED;
  *user_status = RS_STACK_NOT_ASKED;
  if (stack_flags & RS_STACKS_KERNEL) {
    if (entry_caller != 0 && stack_bytes > 8) {
      k = take_stack(ctx, frames + 1, stack_bytes - 8, false, kernel_status);
      if (k > 0) {
        frames[0] = frames[1];
        frames[1] = entry_caller;
        k += 8;
        if (k > RS_STACK_MAX_DEPTH * 8) k = RS_STACK_MAX_DEPTH * 8; /* For the verifier. */
      }
    } else {
      k = take_stack(ctx, frames, stack_bytes, false, kernel_status);
    }
    if (k == 0 && *kernel_status == RS_STACK_TAKEN) *kernel_status = RS_STACK_NOT_ASKED;
  }
  /* A kernel thread (no mm) has no user stack. */
  if ((stack_flags & RS_STACKS_USER) && has_mm) {
    u = take_stack(ctx, (__u8*)frames + k, stack_bytes, true, user_status);
  }
  *kernel_frames = k / 8;
  *user_frames = u / 8;
  return k + u;
}

/* Copies a record built in scratch (header filled but for size) into the
 * current CPU's ring, or counts its drop; nothing once stopping. */
static __always_inline void output_stack_record(__u32 type, struct rs_event_header* h, __u32 size) {
  if (type >= RS_EV_MAX || stopping[type]) {
    if (type < RS_EV_MAX) __sync_fetch_and_add(&outside_window[type], 1);
    return;
  }
  rs_count_seen(type, 1);
  const __u32 cpu = bpf_get_smp_processor_id();
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring) {
    rs_count_drop(type);
    return;
  }
  if (size > RS_STACK_RECORD_MAX) { /* For the verifier: never so. */
    rs_count_drop(type);
    return;
  }
  h->type = type;
  h->size = size;
  if (bpf_ringbuf_output(ring, h, size, rs_wakeup_flag(ring)) != 0) rs_count_drop(type);
}

/* A thread leaves the CPU with its last block still open (`b`, its entry
 * in `blocked_tasks`): it ran again without the program that writes the
 * block's record (resume_blocked, or with stacks_at_switch the switch in)
 * seeing it, and that block has no record. */
static __always_inline void count_unseen_resume(const struct rs_stack_blocked* b) {
  if (b->h.ts_ns != 0) count_stack_loss(RS_STACK_LOSS_RESUME_UNSEEN);
}

/* The task's switches out so far: the kernel counts each before the
 * switch's tracepoint, and none while it is off the CPU. */
static __always_inline __u64 switches_of(bool raw, struct task_struct* t) {
  return (__u64)RS_READ(raw, t, nvcsw) + RS_READ(raw, t, nivcsw);
}

/* Whether the open block `b` is the one the thread now runs again from;
 * if it left the CPU since (its resume unseen, then preempted), the block
 * is closed and counted lost instead: its time would hold that run. */
static __always_inline bool resumes_block(bool raw, struct rs_stack_blocked* b,
                                          struct task_struct* t) {
  if (switches_of(raw, t) == b->off_cpu_ns) return true;
  b->h.ts_ns = 0;
  count_stack_loss(RS_STACK_LOSS_RESUME_UNSEEN);
  return false;
}

/* `prev` leaves the CPU: when it blocks, when and how are kept until it
 * runs again (with stacks_at_switch, its stacks too), in its entry of
 * `blocked_tasks`. An entry lives as long as its thread, written in place
 * at each block and marked taken (h.ts_ns 0) as the thread runs again, so
 * that the hot path is two lookups, not an insert and a delete: the
 * thread's last switch (dead, or a zombie) deletes it. */
static __always_inline void begin_blocked(void* ctx, bool raw, bool preempt,
                                          struct task_struct* prev, __s64 state) {
  __u32 tid = RS_READ(raw, prev, pid);
  if (tid == 0) return;
  /* Dead (X) or a zombie (Z): it never runs again. */
  if ((state & RS_TASK_REPORT_DEAD_STATES) != 0) {
    struct rs_stack_blocked* b = bpf_map_lookup_elem(&blocked_tasks, &tid);
    if (b) {
      /* Once stopping, the kprobe goes first: a resume since is unseen. */
      if (!stopping[RS_EV_STACK_BLOCKED]) count_unseen_resume(b);
      bpf_map_delete_elem(&blocked_tasks, &tid);
    }
    return;
  }
  /* Preempted (R+) or still runnable (R): not waiting for anything. What
   * is left waits: S, D, I, T and t (stopped), P (parked). */
  if (preempt || (state & RS_BLOCKED_STATES) == 0) return;
  if (stopping[RS_EV_STACK_BLOCKED]) return;
  if (rs_filters_on() && !rs_task_selected(prev)) return;
  long err;
  struct rs_stack_blocked* b = bpf_map_lookup_elem(&blocked_tasks, &tid);
  if (b) count_unseen_resume(b);
  if (!stacks_at_switch) {
    if (b) {
      b->h.cpu = bpf_get_smp_processor_id();
      b->state = state;
      b->off_cpu_ns = switches_of(raw, prev);
      b->h.ts_ns = bpf_ktime_get_boot_ns();
      return;
    }
    struct rs_stack_blocked n = {};
    n.h.ts_ns = bpf_ktime_get_boot_ns();
    n.h.cpu = bpf_get_smp_processor_id();
    n.state = state;
    n.off_cpu_ns = switches_of(raw, prev);
    err = bpf_map_update_elem(&blocked_tasks, &tid, &n, BPF_ANY);
  } else {
    const __u32 slot = 0;
    struct rs_stack_blocked* e = bpf_map_lookup_elem(&stack_scratch, &slot);
    if (!e) return;
    e->h.ts_ns = bpf_ktime_get_boot_ns();
    e->h.cpu = bpf_get_smp_processor_id();
    e->pid = tid;
    e->tgid = RS_READ(raw, prev, tgid);
    e->state = state;
    e->off_cpu_ns = switches_of(raw, prev);
    take_stacks(ctx, e->frames, RS_READ(raw, prev, mm) != NULL, 0, &e->kernel_frames,
                &e->user_frames, &e->kernel_status, &e->user_status);
    err = bpf_map_update_elem(&blocked_tasks, &tid, e, BPF_ANY);
  }
  if (err != 0) count_stack_loss(RS_STACK_LOSS_TASKS_FULL);
}

/* With stacks_at_switch: `next` runs again after blocking; its record,
 * kept since it blocked, goes to the ring with its time off the CPU. */
static __always_inline void end_blocked(bool raw, struct task_struct* next) {
  if (!stacks_at_switch) return;
  __u32 tid = RS_READ(raw, next, pid);
  if (tid == 0) return;
  struct rs_stack_blocked* b = bpf_map_lookup_elem(&blocked_tasks, &tid);
  if (!b || b->h.ts_ns == 0 || !resumes_block(raw, b, next)) return;
  const __u64 now = bpf_ktime_get_boot_ns();
  b->off_cpu_ns = now > b->h.ts_ns ? now - b->h.ts_ns : 0;
  b->weight_ns = b->off_cpu_ns;
  __u32 frames = (__u32)b->kernel_frames + b->user_frames;
  if (frames > 2 * (stack_bytes / 8)) frames = 2 * (stack_bytes / 8); /* For the verifier. */
  output_stack_record(RS_EV_STACK_BLOCKED, &b->h, sizeof(*b) + frames * 8);
  b->h.ts_ns = 0;
}

/* The current task runs again, in finish_task_switch() (user space finds
 * the function's name on this kernel and attaches this there). */
SEC("kprobe")
int resume_blocked(struct pt_regs* ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tid = (__u32)id;
  if (tid == 0) return 0;
  struct rs_stack_blocked* b = bpf_map_lookup_elem(&blocked_tasks, &tid);
  if (!b || b->h.ts_ns == 0) return 0;
  struct task_struct* t = (struct task_struct*)bpf_get_current_task();
  if (!resumes_block(true, b, t)) return 0;
  const __u64 now = bpf_ktime_get_boot_ns();
  const __u64 blocked_ts = b->h.ts_ns;
  const __u64 off = now > blocked_ts ? now - blocked_ts : 0;
  const __s64 state = b->state;
  const __u32 blocked_cpu = b->h.cpu;
  b->h.ts_ns = 0;
  __u64 weight = off;
  if (off < blocked_period_ns) {
    /* Taken with probability off / period, weighing the period. */
    if ((__u64)bpf_get_prandom_u32() % blocked_period_ns >= off) {
      /* Plain adds: only this kprobe writes them, and kprobe programs
       * never nest on a CPU. */
      __u32 key = RS_BLOCKED_UNSAMPLED_COUNT;
      __u64* v = bpf_map_lookup_elem(&blocked_unsampled, &key);
      if (v) *v += 1;
      key = RS_BLOCKED_UNSAMPLED_NS;
      v = bpf_map_lookup_elem(&blocked_unsampled, &key);
      if (v) *v += off;
      return 0;
    }
    weight = blocked_period_ns;
  }
  const __u32 slot = 0;
  struct rs_stack_blocked* e = bpf_map_lookup_elem(&stack_scratch, &slot);
  if (!e) return 0;
  e->h.cpu = blocked_cpu;
  e->h.ts_ns = blocked_ts;
  e->pid = tid;
  e->tgid = id >> 32;
  e->off_cpu_ns = off;
  e->weight_ns = weight;
  e->state = state;
  /* The kprobe is on the function's first instruction (take_stacks). */
#if defined(__TARGET_ARCH_arm64)
  const __u64 entry_caller = PT_REGS_RET(ctx);
#else
  const __u64 entry_caller = 0;
#endif
  const __u32 bytes =
      take_stacks(ctx, e->frames, BPF_CORE_READ(t, mm) != NULL, entry_caller, &e->kernel_frames,
                  &e->user_frames, &e->kernel_status, &e->user_status);
  output_stack_record(RS_EV_STACK_BLOCKED, &e->h, sizeof(*e) + bytes);
  return 0;
}

/* Sampling of what runs: a cpu-clock perf event per CPU (user space opens
 * them at stacks.cpu_hz and attaches this), so it works in VMs without a
 * PMU. The idle task is not sampled. */
SEC("perf_event")
int sample_cpu_stack(struct bpf_perf_event_data* ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tid = (__u32)id;
  if (tid == 0) return 0;
  struct task_struct* t = (struct task_struct*)bpf_get_current_task();
  if (rs_filters_on() && !rs_task_selected(t)) return 0;
  const __u32 slot = 1;
  struct rs_stack_cpu_sample* e = bpf_map_lookup_elem(&stack_scratch, &slot);
  if (!e) return 0;
  e->h.cpu = bpf_get_smp_processor_id();
  e->h.ts_ns = bpf_ktime_get_boot_ns();
  e->pid = tid;
  e->tgid = id >> 32;
  const __u32 bytes =
      take_stacks(ctx, e->frames, BPF_CORE_READ(t, mm) != NULL, 0, &e->kernel_frames,
                  &e->user_frames, &e->kernel_status, &e->user_status);
  output_stack_record(RS_EV_STACK_CPU_SAMPLE, &e->h, sizeof(*e) + bytes);
  return 0;
}

static __always_inline void note_blocked(void* ctx, bool raw, bool preempt,
                                         struct task_struct* prev, struct task_struct* next,
                                         unsigned int prev_state) {
  if ((stack_flags & RS_STACKS_BLOCKED) == 0) return;
  end_blocked(raw, next);
  begin_blocked(
      ctx, raw, preempt, prev,
      rs_sched_switch_state(preempt, prev_state, RS_READ(raw, prev, exit_state), task_state_rules));
}

/* Returns the record's time, 0 when none was made. */
static __always_inline __u64 record_switch(bool raw, bool preempt, struct task_struct* prev,
                                           struct task_struct* next, unsigned int prev_state) {
  if (rs_filters_on() && !rs_task_selected(prev) && !rs_task_selected(next)) return 0;
  struct rs_sched_batch_state* s = take_sched_batch(RS_EV_SCHED_SWITCH);
  if (s) {
    struct rs_sched_switch* e = batch_record(s, RS_EV_SCHED_SWITCH, sizeof(*e));
    const __u64 ts = e->h.ts_ns;
    rs_fill_switch_tasks(raw, e, preempt, prev, next, prev_state, task_state_rules);
    rs_fill_switch_comms(raw, e, prev, next);
    commit_batch_record(s, &e->h, RS_EV_SCHED_SWITCH);
    return ts;
  }
  void* ring;
  struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e), &ring);
  if (!e) return 0;
  const __u64 ts = e->h.ts_ns;
  rs_fill_switch_tasks(raw, e, preempt, prev, next, prev_state, task_state_rules);
  rs_fill_switch_comms(raw, e, prev, next);
  rs_submit(ring, e);
  return ts;
}

/* The switch's record first, so that its time is the switch's and not
 * that plus the stacks a blocking thread's switch may take. */
static __always_inline int emit_switch(void* ctx, bool raw, bool preempt, struct task_struct* prev,
                                       struct task_struct* next, unsigned int prev_state) {
  const __u64 ts = record_switch(raw, preempt, prev, next, prev_state);
  note_blocked(ctx, raw, preempt, prev, next, prev_state);
  rs_stall_runqueue(raw, prev, next);
  rs_stall_switch_in(raw, next);
  if (stall_blocked_ns != 0) {
    /* The record's time when there is one: a clock read less. */
    rs_stall_switch_out(raw, prev,
                        rs_sched_switch_state(preempt, prev_state, RS_READ(raw, prev, exit_state),
                                              task_state_rules),
                        ts != 0 ? ts : bpf_ktime_get_boot_ns());
  }
  return 0;
}

/* Since 5.18 the tracepoint passes prev's state as __schedule() read it
 * before deciding on the switch. (Each program has a raw_tp flavour too,
 * named _raw: see RS_READ.) */
SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  return emit_switch(ctx, false, preempt, prev, next, prev_state);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct* prev,
             struct task_struct* next, unsigned int prev_state) {
  return emit_switch(ctx, true, preempt, prev, next, prev_state);
}

/* Before 5.18 (the loader picks one of the two by the tracepoint's
 * arguments): the kernel's own sched_switch event read prev's state field
 * at the tracepoint (__trace_sched_switch_state), and so does this, so its
 * prev_state is what that kernel's ftrace reports, races included. */
SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch_pre_5_18, bool preempt, struct task_struct* prev,
             struct task_struct* next) {
  return emit_switch(ctx, false, preempt, prev, next, rs_task_state(false, prev));
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_pre_5_18_raw, bool preempt, struct task_struct* prev,
             struct task_struct* next) {
  return emit_switch(ctx, true, preempt, prev, next, rs_task_state(true, prev));
}

/* Sends the current CPU's batch to its ring: run by user space with
 * BPF_PROG_TEST_RUN on a CPU whose batch it wants now (EventSource's
 * Drain, and Poll for batches that waited long). Never attached. Returns 1
 * when it interrupted a program changing the batch: run it again. */
SEC("raw_tp")
int flush_sched_batch(void* ctx) {
  const __u32 zero = 0;
  struct rs_sched_batch_state* s = bpf_map_lookup_elem(&sched_batches, &zero);
  if (!s) return 0;
  if (s->busy) return 1;
  s->busy = 1;
  rs_barrier();
  output_sched_batch(s);
  rs_barrier();
  s->busy = 0;
  return 0;
}

/* Returns the record's time, 0 when none was made. */
static __always_inline __u64 emit_wakeup(bool raw, __u32 type, struct task_struct* p) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  struct rs_sched_batch_state* s = take_sched_batch(type);
  if (s) {
    struct rs_sched_wakeup* e = batch_record(s, type, sizeof(*e));
    const __u64 ts = e->h.ts_ns;
    rs_fill_wakeup(raw, e, p);
    commit_batch_record(s, &e->h, type);
    return ts;
  }
  void* ring;
  struct rs_sched_wakeup* e = rs_reserve(type, sizeof(*e), &ring);
  if (!e) return 0;
  const __u64 ts = e->h.ts_ns;
  rs_fill_wakeup(raw, e, p);
  rs_submit(ring, e);
  return ts;
}

/* sched_waking, not sched_wakeup: it runs in the waker's context (the
 * wakeup can run later on the wakee's CPU, from an IPI), and it is what
 * Perfetto builds a thread's runnable state and its waker from. */
SEC("tp_btf/sched_waking")
int BPF_PROG(handle_sched_waking, struct task_struct* p) {
  const __u64 ts = emit_wakeup(false, RS_EV_SCHED_WAKING, p);
  if (stall_blocked_ns != 0) {
    rs_stall_waking(false, p, ts != 0 ? ts : bpf_ktime_get_boot_ns(), task_state_rules);
  }
  return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(handle_sched_waking_raw, struct task_struct* p) {
  const __u64 ts = emit_wakeup(true, RS_EV_SCHED_WAKING, p);
  if (stall_blocked_ns != 0) {
    rs_stall_waking(true, p, ts != 0 ? ts : bpf_ktime_get_boot_ns(), task_state_rules);
  }
  return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct* p) {
  emit_wakeup(false, RS_EV_SCHED_WAKEUP_NEW, p);
  return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new_raw, struct task_struct* p) {
  emit_wakeup(true, RS_EV_SCHED_WAKEUP_NEW, p);
  return 0;
}

static __always_inline void fill_migrate(bool raw, struct rs_sched_migrate* e,
                                         struct task_struct* p, int dest_cpu) {
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->prio = RS_READ(raw, p, prio);
  e->orig_cpu = rs_task_cpu(raw, p);
  e->dest_cpu = dest_cpu;
  e->pad = 0;
  RS_READ_COMM(raw, e->comm, p);
}

/* Batched like the switches: a migration runs where they do, with the run
 * queue locked. A reserve of its own in the ring measured 550-630 ns a
 * migration against 390-400 batched (BM_VsClock, the fork loop). */
static __always_inline int emit_migrate(bool raw, struct task_struct* p, int dest_cpu) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  struct rs_sched_batch_state* s = take_sched_batch(RS_EV_SCHED_MIGRATE);
  if (s) {
    struct rs_sched_migrate* e = batch_record(s, RS_EV_SCHED_MIGRATE, sizeof(*e));
    fill_migrate(raw, e, p, dest_cpu);
    commit_batch_record(s, &e->h, RS_EV_SCHED_MIGRATE);
    return 0;
  }
  void* ring;
  struct rs_sched_migrate* e = rs_reserve(RS_EV_SCHED_MIGRATE, sizeof(*e), &ring);
  if (!e) return 0;
  fill_migrate(raw, e, p, dest_cpu);
  rs_submit(ring, e);
  return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(handle_sched_migrate_task, struct task_struct* p, int dest_cpu) {
  return emit_migrate(false, p, dest_cpu);
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(handle_sched_migrate_task_raw, struct task_struct* p, int dest_cpu) {
  return emit_migrate(true, p, dest_cpu);
}
