/* Stacks of threads that block (bpf/sched.bpf.c, issue 54): where a thread
 * was when it left the CPU to wait, and how long it stayed off. */
#ifndef RINGSIDE_BPF_STACK_EVENTS_H_
#define RINGSIDE_BPF_STACK_EVENTS_H_

#include "bpf/common_events.h"

/* stack_flags (rodata): which stacks are taken (kernel, user), and whether
 * a blocking thread's switch takes them. 0: none, and the stack maps shrink
 * to one entry. */
#define RS_STACKS_KERNEL 0x1u
#define RS_STACKS_USER 0x2u
/* Blocked threads' stacks (the switch's), besides CPU samples' if any. */
#define RS_STACKS_BLOCKED 0x4u

/* Frames a stack holds at most (the `stacks` map's value: this many
 * 8-byte addresses); the loader may set fewer (bpf_config.stacks). */
#define RS_STACK_MAX_DEPTH 127

/* A stack id that says why there is none (kernel_stack, user_stack). */
#define RS_STACK_NOT_ASKED (-1) /* Not configured, or a kernel thread's user stack. */
/* Any other negative id is -errno from bpf_get_stackid(): -EEXIST, another
 * stack holds the bucket (the map is crowded); -EFAULT, the user stack
 * could not be read. */

/* RS_EV_STACK_BLOCKED: a thread that left the CPU in a sleeping state (S, D,
 * I, ...; not preempted) runs again. h.ts_ns is when it blocked, h.cpu the
 * CPU it blocked on; the record is written when it is switched back in. */
struct rs_stack_blocked {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 kernel_stack; /* Id in the `stacks` map, or < 0: see above. */
  __s32 user_stack;
  __u64 off_cpu_ns; /* From leaving the CPU to running again. */
  __s64 state;      /* prev_state of the switch that took it off. */
};

/* RS_EV_STACK_CPU_SAMPLE: what ran on a CPU when its cpu-clock sampling
 * timer fired (bpf_config.stacks.cpu_hz times a second): the task and its
 * stacks. kernel_stack is RS_STACK_NOT_ASKED when the CPU was in user mode. */
struct rs_stack_cpu_sample {
  struct rs_event_header h;
  __s32 pid;
  __s32 tgid;
  __s32 kernel_stack;
  __s32 user_stack;
};

/* What the switch keeps of a blocked thread until it runs again (the
 * `blocked_tasks` map, by tid). */
struct rs_blocked_task {
  __u64 ts_ns;
  __s32 kernel_stack;
  __s32 user_stack;
  __s64 state;
  __u32 cpu;
  __u32 pad;
};

/* Stacks lost, by kind (the `stack_losses` per-CPU array). */
enum rs_stack_loss {
  RS_STACK_LOSS_KERNEL_CROWDED = 0, /* -EEXIST on the kernel stack. */
  RS_STACK_LOSS_USER_CROWDED = 1,   /* -EEXIST on the user stack. */
  RS_STACK_LOSS_USER_FAULT = 2,     /* The user stack could not be read. */
  RS_STACK_LOSS_OTHER = 3,          /* Any other error of bpf_get_stackid. */
  RS_STACK_LOSS_TASKS_FULL = 4,     /* blocked_tasks had no room: no record. */
  RS_STACK_LOSS_MAX = 5,
};

#endif /* RINGSIDE_BPF_STACK_EVENTS_H_ */
