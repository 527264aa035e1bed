/* Stacks (bpf/sched.bpf.c, issue 54): where a thread was when it left the
 * CPU to wait and how long it stayed off, and what ran when a CPU's
 * sampling timer fired. Each record carries its frames: the agent
 * de-duplicates them, so nothing in the kernel fills up or goes stale. */
#ifndef RINGSIDE_BPF_STACK_EVENTS_H_
#define RINGSIDE_BPF_STACK_EVENTS_H_

#include "bpf/common_events.h"

/* stack_flags (rodata): which stacks are taken (kernel, user), and whether
 * blocked threads' are. 0: none. */
#define RS_STACKS_KERNEL 0x1u
#define RS_STACKS_USER 0x2u
/* Blocked threads' stacks, besides CPU samples' if any. */
#define RS_STACKS_BLOCKED 0x4u

/* Frames a stack holds at most; the loader may set fewer
 * (bpf_config.stacks.max_depth). */
#define RS_STACK_MAX_DEPTH 127

/* Why a record has no frames of a kind (kernel_status, user_status). */
#define RS_STACK_TAKEN 0 /* Its frames follow (maybe none). */
#define RS_STACK_NOT_ASKED                                \
  1 /* Not configured, a kernel thread's user stack, or a \
     * CPU sample taken in user mode's kernel stack. */
/* Any negative status is -errno from bpf_get_stack(): -EFAULT, the user
 * stack could not be read. */

/* RS_EV_STACK_BLOCKED: a thread that left the CPU in a sleeping state (S, D,
 * I, ...; not preempted) runs again. h.ts_ns is when it blocked, h.cpu the
 * CPU it blocked on. Written as it runs again, in its own context, so that
 * its stacks are still where it waited. Blocks shorter than the sampling
 * period (blocked_period_ns) are taken with a probability of their length
 * over the period and then weigh the period: the sum of weights estimates
 * the time blocked without bias, and blocks longer than the period are all
 * there with their own length. */
struct rs_stack_blocked {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  /* From leaving the CPU to running again. In `blocked_tasks`, while the
   * block is open: the thread's switches out so far (nvcsw + nivcsw, this
   * one included), for the resume to tell whether it is this block's. */
  __u64 off_cpu_ns;
  __u64 weight_ns; /* off_cpu_ns, or the period for a sampled short block. */
  __s64 state;     /* prev_state of the switch that took it off. */
  __u16 kernel_frames;
  __u16 user_frames;
  __s16 kernel_status; /* RS_STACK_TAKEN, RS_STACK_NOT_ASKED or -errno. */
  __s16 user_status;
  /* Then kernel_frames addresses, then user_frames: innermost first. */
  __u64 frames[];
};

/* RS_EV_STACK_CPU_SAMPLE: what ran on a CPU when its cpu-clock sampling
 * timer fired (bpf_config.stacks.cpu_hz times a second): the task and its
 * stacks. The kernel stack is RS_STACK_NOT_ASKED when the CPU was in user
 * mode. */
struct rs_stack_cpu_sample {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __u16 kernel_frames;
  __u16 user_frames;
  __s16 kernel_status;
  __s16 user_status;
  __u64 frames[];
};

/* Stacks lost or cut, by kind (the `stack_losses` per-CPU array). */
enum rs_stack_loss {
  RS_STACK_LOSS_KERNEL_FAILED = 0, /* bpf_get_stack failed on a kernel stack. */
  RS_STACK_LOSS_USER_FAULT = 1,    /* The user stack could not be read. */
  RS_STACK_LOSS_USER_FAILED = 2,   /* Any other error on a user stack. */
  RS_STACK_LOSS_TASKS_FULL = 3,    /* blocked_tasks had no room: no record. */
  RS_STACK_LOSS_TRUNCATED = 4,     /* A stack deeper than max_depth: its root cut. */
  /* A thread that blocked ran again unseen: no record of that block. A
   * kernel can skip the sched_switch tracepoint of some switches (a 6.18
   * guest never reported one out of a certain process's threads, ftrace's
   * events missing them too: 2 of 750 switches in after a sleep came after
   * one), and a kprobe run can be skipped. Counted where the thread is
   * seen again with its block still open: at its next block or exit, or at
   * a resume after it left the CPU another time (its switch count moved). A
   * block whose own switch out went unreported is neither. */
  RS_STACK_LOSS_RESUME_UNSEEN = 5,
  RS_STACK_LOSS_MAX = 6,
};

/* Blocks shorter than the sampling period that were not taken (the
 * `blocked_unsampled` per-CPU array): how many, and their nanoseconds. Not
 * a loss: the sampled ones stand for them. */
enum rs_blocked_unsampled {
  RS_BLOCKED_UNSAMPLED_COUNT = 0,
  RS_BLOCKED_UNSAMPLED_NS = 1,
  RS_BLOCKED_UNSAMPLED_MAX = 2,
};

/* The most bytes a stack record takes: the larger layout and two full
 * stacks. */
#define RS_STACK_RECORD_MAX (sizeof(struct rs_stack_blocked) + 2 * RS_STACK_MAX_DEPTH * 8)

#endif /* RINGSIDE_BPF_STACK_EVENTS_H_ */
