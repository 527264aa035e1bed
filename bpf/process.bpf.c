// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle: what ran. Each program has a raw_tp flavour, named
 * _raw, for kernels that do not expose their BTF: see RS_READ. */
/* rings.bpf.h first: it brings vmlinux.h, which the record header needs. */
#include "bpf/rings.bpf.h"

#include "bpf/process_events.h"

/* In the one object (bpf/all.bpf.c), fork, exit, free and rename records
 * join the scheduling records in each CPU's batch (bpf/sched_batch.bpf.h),
 * as the migrations do: one reserve of its own in the ring measured 500 ns
 * a fork, 420 an exit, 214 a free, 2.4 to 4.4 times a program that only
 * reads the clock (BM_VsClock, the fork loop). A group's own object has no
 * batch (the batch is the scheduling group's), so it reserves each. */
#ifdef RS_BATCH_PROCESS_RECORDS
#include "bpf/sched_batch.bpf.h"
#define rs_take_batch(type) take_sched_batch(type)
#else
struct rs_sched_batch_state;
#define rs_take_batch(type) ((struct rs_sched_batch_state*)0)
#define batch_record(s, type, size) ((void*)0)
#define commit_batch_record(s, h, type) ((void)0)
#endif

/* A record of `type`: room in the CPU's batch (*batch set) or in its ring
 * (*ring set); NULL when neither (stopped, or the ring full). */
static __always_inline void* rs_process_record(__u32 type, __u32 size,
                                               struct rs_sched_batch_state** batch, void** ring) {
  *batch = rs_take_batch(type);
  if (*batch) return batch_record(*batch, type, size);
  return rs_reserve(type, size, ring);
}

/* Gives the record rs_process_record() made to its batch or its ring. */
static __always_inline void rs_process_commit(struct rs_sched_batch_state* batch, void* ring,
                                              void* e, __u32 type) {
  if (batch) {
    commit_batch_record(batch, (struct rs_event_header*)e, type);
  } else {
    rs_submit(ring, e);
  }
}

static __always_inline int on_fork(bool raw, struct task_struct* parent,
                                   struct task_struct* child) {
  if (rs_filters_on() && !rs_task_selected(parent)) return 0;
  struct rs_sched_batch_state* batch;
  void* ring;
  struct rs_process_fork* e = rs_process_record(RS_EV_PROCESS_FORK, sizeof(*e), &batch, &ring);
  if (!e) return 0;
  e->parent_pid = RS_READ(raw, parent, pid);
  e->parent_tgid = RS_READ(raw, parent, tgid);
  e->child_pid = RS_READ(raw, child, pid);
  e->child_tgid = RS_READ(raw, child, tgid);
  RS_READ_COMM(raw, e->parent_comm, parent);
  RS_READ_COMM(raw, e->child_comm, child);
  rs_process_commit(batch, ring, e, RS_EV_PROCESS_FORK);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_process_fork, struct task_struct* parent, struct task_struct* child) {
  return on_fork(false, parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(handle_process_fork_raw, struct task_struct* parent, struct task_struct* child) {
  return on_fork(true, parent, child);
}

static __always_inline int on_exec(bool raw, struct task_struct* p, pid_t old_pid,
                                   struct linux_binprm* bprm) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  void* ring;
  struct rs_process_exec* e = rs_reserve(RS_EV_PROCESS_EXEC, sizeof(*e), &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->old_pid = old_pid;
  e->ppid = BPF_CORE_READ(p, real_parent, tgid);
  const __u64 uid_gid = bpf_get_current_uid_gid();
  e->uid = (__u32)uid_gid;
  e->gid = (__u32)(uid_gid >> 32);
  e->pad = 0;
  e->cgroup_id = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
  RS_READ_COMM(raw, e->comm, p);
  long n =
      bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
  e->filename_len = n > 0 ? (__u16)(n - 1) : 0;
  /* The new image's argument block is in place by now. */
  const unsigned long arg_start = BPF_CORE_READ(p, mm, arg_start);
  const unsigned long arg_end = BPF_CORE_READ(p, mm, arg_end);
  __u64 len = arg_end > arg_start ? arg_end - arg_start : 0;
  if (len > RS_ARGV_LEN) len = RS_ARGV_LEN;
  if (len > 0 && bpf_probe_read_user(e->argv, len, (const void*)arg_start) != 0) len = 0;
  e->argv_len = (__u16)len;
  rs_submit(ring, e);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_process_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  return on_exec(false, p, old_pid, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(handle_process_exec_raw, struct task_struct* p, pid_t old_pid,
             struct linux_binprm* bprm) {
  return on_exec(true, p, old_pid, bprm);
}

/* The group-dead argument is newer than the tracepoint; the signal's live
 * count (already decremented here) says the same on every kernel. */
static __always_inline int on_exit(bool raw, struct task_struct* p) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  struct rs_sched_batch_state* batch;
  void* ring;
  struct rs_process_exit* e = rs_process_record(RS_EV_PROCESS_EXIT, sizeof(*e), &batch, &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->exit_code = RS_READ(raw, p, exit_code);
  e->group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;
  RS_READ_COMM(raw, e->comm, p);
  rs_process_commit(batch, ring, e, RS_EV_PROCESS_EXIT);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_process_exit, struct task_struct* p) { return on_exit(false, p); }

SEC("raw_tp/sched_process_exit")
int BPF_PROG(handle_process_exit_raw, struct task_struct* p) { return on_exit(true, p); }

static __always_inline int on_rename(bool raw, struct task_struct* task, const char* comm) {
  if (rs_filters_on() && !rs_task_selected(task)) return 0;
  struct rs_sched_batch_state* batch;
  void* ring;
  struct rs_task_rename* e = rs_process_record(RS_EV_TASK_RENAME, sizeof(*e), &batch, &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, task, pid);
  e->tgid = RS_READ(raw, task, tgid);
  RS_READ_COMM(raw, e->old_comm, task);
  __builtin_memset(e->new_comm, 0, RS_TASK_COMM_LEN);
  bpf_probe_read_kernel_str(e->new_comm, sizeof(e->new_comm), comm);
  rs_process_commit(batch, ring, e, RS_EV_TASK_RENAME);
  return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(handle_task_rename, struct task_struct* task, const char* comm) {
  return on_rename(false, task, comm);
}

SEC("raw_tp/task_rename")
int BPF_PROG(handle_task_rename_raw, struct task_struct* task, const char* comm) {
  return on_rename(true, task, comm);
}

/* Runs in the RCU callback that frees the task, on whichever CPU runs it:
 * the task is dead, but its fields (and its cgroup, for the filter) are
 * still there until the put_task_struct() after the tracepoint. */
static __always_inline int on_free(bool raw, struct task_struct* p) {
  if (rs_filters_on() && !rs_task_selected(p)) return 0;
  struct rs_sched_batch_state* batch;
  void* ring;
  struct rs_process_free* e = rs_process_record(RS_EV_PROCESS_FREE, sizeof(*e), &batch, &ring);
  if (!e) return 0;
  e->pid = RS_READ(raw, p, pid);
  e->tgid = RS_READ(raw, p, tgid);
  e->prio = RS_READ(raw, p, prio);
  e->current_pid = (__s32)bpf_get_current_pid_tgid();
  RS_READ_COMM(raw, e->comm, p);
  rs_process_commit(batch, ring, e, RS_EV_PROCESS_FREE);
  return 0;
}

SEC("tp_btf/sched_process_free")
int BPF_PROG(handle_process_free, struct task_struct* p) { return on_free(false, p); }

SEC("raw_tp/sched_process_free")
int BPF_PROG(handle_process_free_raw, struct task_struct* p) { return on_free(true, p); }
