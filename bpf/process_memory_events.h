/* What the task iterator of bpf/process_memory.bpf.c writes, shared with
 * its C++ reader (bpf/process_memory.h). */
#ifndef RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_
#define RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* One process (a thread-group leader with an address space) and what
 * /proc/PID/status says of its memory, read where the kernel's task_mem()
 * reads it: the resident pages by kind (file, anonymous, shmem: their sum
 * is statm's second field), the swap entries, and the pages of its
 * mappings (VmSize), of locked mappings (VmLck) and the resident peak as
 * last recorded (VmHWM is the larger of that and the resident pages now);
 * and its OOM score adjustment (/proc/PID/oom_score_adj). tgid is the
 * host's (init namespace) id. */
struct rs_process_counters {
  __s32 tgid;
  __s32 oom_score_adj;
  __u64 file_pages;
  __u64 anon_pages;
  __u64 shmem_pages;
  __u64 swap_entries;
  __u64 total_vm;
  __u64 locked_vm;
  __u64 hiwater_rss;
};

#endif /* RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_ */
