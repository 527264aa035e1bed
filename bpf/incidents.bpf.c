// SPDX-License-Identifier: GPL-2.0
/* Incidents: what went wrong. OOM kills, fatal signals, core dumps. Each
 * program has a raw_tp flavour, named _raw, for kernels that do not expose
 * their BTF: see RS_READ. */
/* rings.bpf.h first: it brings vmlinux.h, which the record header needs. */
#include "bpf/rings.bpf.h"

#include "bpf/incident_events.h"

#define RS_SIGILL 4
#define RS_SIGABRT 6
#define RS_SIGBUS 7
#define RS_SIGFPE 8
#define RS_SIGKILL 9
#define RS_SIGSEGV 11
#define RS_NSIG 64

/* Kernels since 6.8: the victim task and its uid. */
static __always_inline int on_mark_victim(bool raw, struct task_struct* task, uid_t uid) {
  void* ring;
  struct rs_oom_kill* e = rs_reserve(RS_EV_OOM_KILL, sizeof(*e), &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, task, pid);
  e->tgid = RS_READ(raw, task, tgid);
  e->uid = uid;
  e->killer_pid = bpf_get_current_pid_tgid() >> 32;
  RS_READ_COMM(raw, e->comm, task);
  e->cgroup_id = rs_cgroup_id_of(task);
  rs_submit_now(ring, e);
  return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(handle_mark_victim, struct task_struct* task, uid_t uid) {
  return on_mark_victim(false, task, uid);
}

SEC("raw_tp/mark_victim")
int BPF_PROG(handle_mark_victim_raw, struct task_struct* task, uid_t uid) {
  return on_mark_victim(true, task, uid);
}

/* Older kernels report only the victim's pid; the loader picks this one
 * when the kernel's mark_victim has no task argument. */
static __always_inline int on_mark_victim_pid(int pid) {
  void* ring;
  struct rs_oom_kill* e = rs_reserve(RS_EV_OOM_KILL, sizeof(*e), &ring);
  if (!e) return 0;
  e->pid = pid;
  e->tgid = 0;
  e->uid = 0;
  e->killer_pid = bpf_get_current_pid_tgid() >> 32;
  __builtin_memset(e->comm, 0, RS_TASK_COMM_LEN);
  e->cgroup_id = 0;
  rs_submit_now(ring, e);
  return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(handle_mark_victim_pid, int pid) { return on_mark_victim_pid(pid); }

SEC("raw_tp/mark_victim")
int BPF_PROG(handle_mark_victim_pid_raw, int pid) { return on_mark_victim_pid(pid); }

static __always_inline bool fatal_by_default(int sig) {
  return sig == RS_SIGSEGV || sig == RS_SIGBUS || sig == RS_SIGILL || sig == RS_SIGFPE ||
         sig == RS_SIGABRT;
}

/* Sent, not yet delivered: here the sender is still known. A signal counts
 * as fatal when the target will take its default action (a fault with the
 * signal blocked or ignored has been reset to the default by now). */
static __always_inline int on_signal_generate(bool raw, int sig, struct kernel_siginfo* info,
                                              struct task_struct* task, int result) {
  if (result != TRACE_SIGNAL_DELIVERED) return 0;
  if (sig != RS_SIGKILL) {
    if (!fatal_by_default(sig)) return 0;
    const unsigned int index = (unsigned int)(sig - 1);
    if (index >= RS_NSIG) return 0;
    void* handler = BPF_CORE_READ(task, sighand, action[index].sa.sa_handler);
    if (handler != NULL) return 0; /* Caught or ignored: not fatal. */
  }
  if (rs_filters_on() && !rs_task_selected(task)) return 0;
  void* ring;
  struct rs_fatal_signal* e = rs_reserve(RS_EV_FATAL_SIGNAL, sizeof(*e), &ring);
  if (!e) return 0;
  /* The sender is the current task. Read with the helpers every kernel
   * since 4.2 has: bpf_get_current_task_btf() came in 5.11, and 5.10's
   * verifier refuses a program that calls it. */
  const __u64 sender = bpf_get_current_pid_tgid();
  e->sig = sig;
  /* SEND_SIG_NOINFO / SEND_SIG_PRIV are small constants, not pointers. */
  e->si_code = (unsigned long)info > 4096 ? BPF_CORE_READ(info, si_code) : 0;
  e->sender_pid = (__u32)sender;
  e->sender_tgid = sender >> 32;
  e->target_pid = RS_READ(raw, task, pid);
  e->target_tgid = RS_READ(raw, task, tgid);
  bpf_get_current_comm(e->sender_comm, RS_TASK_COMM_LEN);
  RS_READ_COMM(raw, e->target_comm, task);
  e->target_cgroup_id = rs_cgroup_id_of(task);
  rs_submit_now(ring, e);
  return 0;
}

SEC("tp_btf/signal_generate")
int BPF_PROG(handle_signal_generate, int sig, struct kernel_siginfo* info, struct task_struct* task,
             int group, int result) {
  return on_signal_generate(false, sig, info, task, result);
}

SEC("raw_tp/signal_generate")
int BPF_PROG(handle_signal_generate_raw, int sig, struct kernel_siginfo* info,
             struct task_struct* task, int group, int result) {
  return on_signal_generate(true, sig, info, task, result);
}

/* A process's last thread exits with the core-dump bit in its exit code. */
static __always_inline int on_core_dump_exit(bool raw, struct task_struct* p) {
  const int code = RS_READ(raw, p, exit_code);
  if ((code & 0x80) == 0 || (code & 0x7f) == 0) return 0;
  if (BPF_CORE_READ(p, signal, live.counter) != 0) return 0;
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  void* ring;
  struct rs_core_dump* e = rs_reserve(RS_EV_CORE_DUMP, sizeof(*e), &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->sig = code & 0x7f;
  e->pad = 0;
  RS_READ_COMM(raw, e->comm, p);
  e->cgroup_id = rs_cgroup_id_of(p);
  rs_submit_now(ring, e);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_core_dump_exit, struct task_struct* p) { return on_core_dump_exit(false, p); }

SEC("raw_tp/sched_process_exit")
int BPF_PROG(handle_core_dump_exit_raw, struct task_struct* p) {
  return on_core_dump_exit(true, p);
}
