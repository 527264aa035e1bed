/* What the task iterator of bpf/process_memory.bpf.c writes, shared with
 * its C++ reader (bpf/process_memory.h). */
#ifndef RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_
#define RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* One process (a thread-group leader with an address space) and its
 * resident pages: file, anonymous and shmem, as the second field of
 * /proc/PID/statm counts them. tgid is the host's (init namespace) id. */
struct rs_process_rss {
  __s32 tgid;
  __u32 pad;
  __u64 resident_pages;
};

#endif /* RINGSIDE_BPF_PROCESS_MEMORY_EVENTS_H_ */
