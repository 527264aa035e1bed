/* sched_switch's prev_state as the kernel's own tracepoint reports it, shared
 * by the BPF program (which computes it at each switch) and the C++ side
 * (which picks the rules for the running kernel and unit-tests the mapping).
 *
 * The tracepoint does not report the task's raw state bits: it reports one
 * bit for one state letter (R S D T t X Z P I), or TASK_REPORT_MAX for a
 * preemption ("R+"). Perfetto's importer expects exactly that; raw bits such
 * as TASK_KILLABLE|TASK_FREEZABLE (0x2102) are not a state it knows.
 *
 *   preempt                    -> TASK_REPORT_MAX (0x100)
 *   (state | exit_state) & TASK_REPORT (0x7f)
 *   TASK_IDLE (D|NOLOAD)       -> TASK_REPORT_IDLE (0x80, "I")
 *   TASK_RTLOCK_WAIT           -> TASK_UNINTERRUPTIBLE ("D")
 *   TASK_FROZEN                -> TASK_UNINTERRUPTIBLE (newer kernels)
 *   then only the highest bit left: 1 << (fls(state) - 1)
 *
 * This layout (TASK_REPORT_MAX 0x100, TASK_REPORT_IDLE 0x80) holds from 4.14
 * on. Since 5.18 `state` is the tracepoint's prev_state argument; before,
 * the program reads the task's state field at the tracepoint, as the
 * kernel's own event did then. Since 6.6 two rules changed, with stable
 * backports, so the loader passes them in as RS_TASK_STATE_RULE_* bits
 * (task_state_rules.h decides them from the kernel release). */
#ifndef RINGSIDE_BPF_TASK_STATE_H_
#define RINGSIDE_BPF_TASK_STATE_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define RS_TASK_INTERRUPTIBLE 0x0001u
#define RS_TASK_UNINTERRUPTIBLE 0x0002u
#define RS_TASK_REPORT 0x007fu /* R S D T t X Z P: state and exit_state bits. */
#define RS_TASK_NOLOAD 0x0400u
#define RS_TASK_IDLE (RS_TASK_UNINTERRUPTIBLE | RS_TASK_NOLOAD)
#define RS_TASK_RTLOCK_WAIT 0x1000u        /* 5.15+ */
#define RS_TASK_FROZEN 0x8000u             /* 6.1+; the bit is unused before. */
#define RS_TASK_REPORT_DEAD_STATES 0x0030u /* X (EXIT_DEAD) and Z (EXIT_ZOMBIE). */
#define RS_TASK_REPORT_IDLE 0x0080u
#define RS_TASK_REPORT_MAX 0x0100u

/* Since 6.6 (and 6.1.123): TASK_IDLE and TASK_RTLOCK_WAIT are tested as
 * masks, so TASK_IDLE|TASK_FREEZABLE reports I, not D. Before: equality. */
#define RS_TASK_STATE_RULE_MASKED_IDLE 0x1u
/* Since 6.13 (and 6.12.8, 6.6.69, 6.1.123): a frozen task reports D, not R. */
#define RS_TASK_STATE_RULE_FROZEN_AS_D 0x2u
#define RS_TASK_STATE_RULES_NEWEST (RS_TASK_STATE_RULE_MASKED_IDLE | RS_TASK_STATE_RULE_FROZEN_AS_D)

/* What the sched_switch tracepoint reports as prev_state, for a switch with
 * `preempt`, the prev task's raw `state` (the tracepoint's prev_state
 * argument) and its `exit_state`, under `rules`. */
static inline __s64 rs_sched_switch_state(int preempt, __u32 state, __u32 exit_state, __u32 rules) {
  if (preempt) return RS_TASK_REPORT_MAX;
  __u32 report = (state | exit_state) & RS_TASK_REPORT;
  const int masked = (rules & RS_TASK_STATE_RULE_MASKED_IDLE) != 0;
  if (masked ? (state & RS_TASK_IDLE) == RS_TASK_IDLE : state == RS_TASK_IDLE) {
    report = RS_TASK_REPORT_IDLE;
  }
  if ((masked ? (state & RS_TASK_RTLOCK_WAIT) != 0 : state == RS_TASK_RTLOCK_WAIT) ||
      ((rules & RS_TASK_STATE_RULE_FROZEN_AS_D) && (state & RS_TASK_FROZEN))) {
    report = RS_TASK_UNINTERRUPTIBLE;
  }
  /* Keep the highest set bit only (the kernel's 1 << (fls(x) - 1)). */
  report |= report >> 1;
  report |= report >> 2;
  report |= report >> 4;
  report |= report >> 8;
  return report - (report >> 1);
}

#endif /* RINGSIDE_BPF_TASK_STATE_H_ */
