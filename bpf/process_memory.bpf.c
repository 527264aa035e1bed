// SPDX-License-Identifier: GPL-2.0
/* linux.process_stats' pass over the processes: a task iterator (5.8) that
 * writes, for each thread-group leader with an address space, its tgid and
 * the memory counters /proc/PID/status shows, read where the kernel reads
 * them. One read of the iterator replaces a listing of /proc and, per
 * process, a statm read and (for those written) a status and an
 * oom_score_adj read. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/process_memory_events.h"

char LICENSE[] SEC("license") = "GPL";

/* Before 6.2 an mm's counters were atomic_long_t in a struct mm_rss_stat;
 * since, they are percpu_counters, whose count is what statm reads
 * (percpu_counter_read_positive). The indices (MM_FILEPAGES,
 * MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES) are the same on both. Both
 * layouts are spelled out here, as the vmlinux.h of the build has only
 * one of them (a cross build's kernel may be older than 6.2). */
struct mm_rss_stat___pre_6_2 {
  atomic_long_t count[4];
} __attribute__((preserve_access_index));
struct mm_struct___pre_6_2 {
  struct mm_rss_stat___pre_6_2 rss_stat;
} __attribute__((preserve_access_index));
struct percpu_counter___since_6_2 {
  s64 count;
} __attribute__((preserve_access_index));
struct mm_struct___since_6_2 {
  struct percpu_counter___since_6_2 rss_stat[4];
} __attribute__((preserve_access_index));

enum { RS_MM_FILEPAGES = 0, RS_MM_ANONPAGES = 1, RS_MM_SWAPENTS = 2, RS_MM_SHMEMPAGES = 3 };

/* Counter `i` of `mm`, never below 0 (as statm shows it: a counter's
 * batched deltas can leave it briefly negative). */
static __always_inline __u64 mm_counter(struct mm_struct* mm, int i) {
  long v;
  if (bpf_core_type_exists(struct mm_rss_stat___pre_6_2)) {
    struct mm_struct___pre_6_2* old = (void*)mm;
    v = BPF_CORE_READ(old, rss_stat.count[i].counter);
  } else {
    /* By the kernel's sizes: the local percpu_counter has only `count`,
     * and an index into its array would step by that size, not the
     * kernel's. */
    struct mm_struct___since_6_2* now = (void*)mm;
    const __u64 at = bpf_core_field_offset(now->rss_stat) +
                     (__u64)i * bpf_core_type_size(struct percpu_counter___since_6_2) +
                     bpf_core_field_offset(struct percpu_counter___since_6_2, count);
    if (bpf_probe_read_kernel(&v, sizeof(v), (const char*)mm + at) != 0) v = 0;
  }
  return v > 0 ? (__u64)v : 0;
}

SEC("iter/task")
int process_memory(struct bpf_iter__task* ctx) {
  struct task_struct* task = ctx->task;
  if (!task) return 0; /* The pass's end. */
  const __s32 tgid = BPF_CORE_READ(task, tgid);
  if (BPF_CORE_READ(task, pid) != tgid) return 0; /* A thread: its leader counts. */
  struct mm_struct* mm = BPF_CORE_READ(task, mm);
  if (!mm) return 0; /* A kernel thread, or a leader that has exited. */
  struct rs_process_counters out = {.tgid = tgid};
  out.oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
  out.file_pages = mm_counter(mm, RS_MM_FILEPAGES);
  out.anon_pages = mm_counter(mm, RS_MM_ANONPAGES);
  out.shmem_pages = mm_counter(mm, RS_MM_SHMEMPAGES);
  out.swap_entries = mm_counter(mm, RS_MM_SWAPENTS);
  out.total_vm = BPF_CORE_READ(mm, total_vm);
  out.locked_vm = BPF_CORE_READ(mm, locked_vm);
  out.hiwater_rss = BPF_CORE_READ(mm, hiwater_rss);
  bpf_seq_write(ctx->meta->seq, &out, sizeof(out));
  return 0;
}
