/* What every ringside BPF object shares: the per-CPU staging rings, the
 * per-CPU drop counters, the rodata filters, and the helpers that reserve a
 * record. The C++ loader creates the maps once and hands the same fds to
 * every object, so all programs write into one ring per CPU and the records
 * of a CPU stay in the order they were reserved, whatever their type. */
#ifndef RINGSIDE_BPF_RINGS_BPF_H_
#define RINGSIDE_BPF_RINGS_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/common_events.h"

/* Here, so that an object made of several groups' files has it once. */
char LICENSE[] SEC("license") = "GPL";

struct rs_ring {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20); /* The loader supplies the real template. */
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, RS_MAX_CPUS);
  __type(key, __u32);
  __array(values, struct rs_ring);
} rings SEC(".maps");

/* Records lost because the ring refused them, by CPU (the key) and type:
 * a plain array user space maps and reads without a system call, where a
 * per-CPU array costs one on every pass of the reader (most of an idle
 * pass). The loader sizes it to the possible CPUs. */
struct rs_drop_counts {
  __u64 records[RS_EV_MAX];
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rs_drop_counts);
} drops SEC(".maps");

/* Records the programs made, per CPU (the per-CPU value) and type (the
 * index), whether sent into a ring or dropped: one key, so that counting is
 * one lookup. A batch's records are counted when the batch is sent or
 * dropped (those still waiting in it are in its `records`). With them the
 * file closes its own count of each type (ringside_events_seen = events in
 * the file + their losses), and tests tell runs the kernel never made from
 * events ringside lost. */
struct rs_seen_counts {
  __u64 records[RS_EV_MAX];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rs_seen_counts);
} seen SEC(".maps");

/* The cgroup set filter: cgroup v2 ids (key) whose tasks are recorded; the
 * value is unused. User space fills it before attaching and keeps it current
 * (containers come and go); shared by every object like the rings. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, RS_MAX_FILTER_CGROUPS);
  __type(key, __u64);
  __type(value, __u8);
} filter_cgroups SEC(".maps");

/* Filters, set by the loader before load; all off by default. A task is
 * selected when it passes every filter that is on. The cgroup filter is
 * one: a task passes it when its own cgroup is filter_cgroup_id or in
 * filter_cgroups (on when filter_cgroup_set is). */
const volatile __u32 filter_num_tgids = 0;
const volatile __s32 filter_tgids[RS_MAX_FILTER_TGIDS] = {};
const volatile __u64 filter_cgroup_id = 0; /* cgroup v2 id (inode of its directory). */
const volatile bool filter_cgroup_set = false;
const volatile __s32 filter_max_prio = -1; /* Kernel prio: 0-99 RT, 100-139 normal. */

/* A task's cgroup v2 id: the inode number of its cgroup's directory. */
static __always_inline __u64 rs_cgroup_id_of(struct task_struct* t) {
  return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

static __always_inline bool rs_filters_on(void) {
  return filter_num_tgids != 0 || filter_cgroup_id != 0 || filter_cgroup_set ||
         filter_max_prio >= 0;
}

static __always_inline bool rs_task_selected(struct task_struct* t) {
  if (filter_num_tgids != 0) {
    const __s32 tgid = BPF_CORE_READ(t, tgid);
    bool found = false;
    for (__u32 i = 0; i < RS_MAX_FILTER_TGIDS; i++) {
      if (i < filter_num_tgids && filter_tgids[i] == tgid) found = true;
    }
    if (!found) return false;
  }
  if (filter_cgroup_id != 0 || filter_cgroup_set) {
    __u64 cgroup_id = rs_cgroup_id_of(t);
    if (cgroup_id != filter_cgroup_id &&
        !(filter_cgroup_set && bpf_map_lookup_elem(&filter_cgroups, &cgroup_id))) {
      return false;
    }
  }
  if (filter_max_prio >= 0 && BPF_CORE_READ(t, prio) > filter_max_prio) return false;
  return true;
}

/* Atomic: the process programs run preemptible on a preemptible kernel, so
 * two of them can count a drop on one CPU at once. */
static __always_inline void rs_count_drops(__u32 type, __u64 count) {
  const __u32 cpu = bpf_get_smp_processor_id();
  struct rs_drop_counts* n = bpf_map_lookup_elem(&drops, &cpu);
  if (n && type < RS_EV_MAX) __sync_fetch_and_add(&n->records[type], count);
}

static __always_inline void rs_count_drop(__u32 type) { rs_count_drops(type, 1); }

/* Atomic for the same reason as the drops. */
static __always_inline void rs_count_seen(__u32 type, __u64 count) {
  const __u32 zero = 0;
  struct rs_seen_counts* n = bpf_map_lookup_elem(&seen, &zero);
  if (n && type < RS_EV_MAX) __sync_fetch_and_add(&n->records[type], count);
}

/* Bytes of unread records in a CPU's ring past which rs_submit wakes the
 * consumer: a quarter of the ring, set by the loader before load. */
const volatile __u64 ring_wakeup_bytes = (1 << 20) / 4;

/* Per event type, set by user space while the programs are attached one by
 * one and when recording stops, before they are detached (each object has
 * its own). Detaching takes a grace period per program: without it the
 * rings would end with tens of milliseconds in which some programs still
 * record and others no longer do (renames of processes whose fork and exec
 * are not recorded, switches without their wakeups). By type, not one flag
 * for all, so that the groups' programs can start in order when they are
 * loaded as one object (bpf/all.bpf.c). EventSource::SetRecording. */
volatile __u8 stopping[RS_EV_MAX] = {};

/* Runs per event type that found its `stopping` set: events outside the
 * recording window, neither recorded nor lost. Only that path pays for the
 * count, so the kernel's run count of a program stays exactly recorded +
 * dropped + outside (EventSource::not_recorded). */
__u64 outside_window[RS_EV_MAX] = {};

/* Reserves `size` bytes in the current CPU's ring and fills the header, or
 * counts a drop of `type` and returns NULL; NULL without a drop once
 * stopping. `*ring` is the ring, for rs_submit. */
static __always_inline void* rs_reserve(__u32 type, __u32 size, void** ring) {
  if (type >= RS_EV_MAX || stopping[type]) {
    if (type < RS_EV_MAX) __sync_fetch_and_add(&outside_window[type], 1);
    return NULL;
  }
  rs_count_seen(type, 1);
  __u32 cpu = bpf_get_smp_processor_id();
  *ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!*ring) {
    rs_count_drop(type);
    return NULL;
  }
  struct rs_event_header* h = bpf_ringbuf_reserve(*ring, size, 0);
  if (!h) {
    rs_count_drop(type);
    return NULL;
  }
  h->type = type;
  h->size = size;
  h->cpu = cpu;
  h->ts_ns = bpf_ktime_get_boot_ns();
  return h;
}

/* Submits a record from rs_reserve() into its `ring`. The consumer is woken
 * only once the ring is a quarter full: it drains on its own period
 * otherwise. Waking it per record costs an irq_work (a self-IPI:
 * microseconds in a VM) on every event, which measured 4.6 us per
 * sched_switch here instead of ~0.3. */
static __always_inline __u64 rs_wakeup_flag(void* ring) {
  return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) > ring_wakeup_bytes ? BPF_RB_FORCE_WAKEUP
                                                                        : BPF_RB_NO_WAKEUP;
}

static __always_inline void rs_submit(void* ring, void* record) {
  bpf_ringbuf_submit(record, rs_wakeup_flag(ring));
}

/* Submits an incident's record (an OOM kill, a fatal signal, a core dump, a
 * stall), waking the consumer at once: a trigger may take a snapshot of it,
 * and the consumer waits up to a second between passes of quiet rings
 * (agent/sources/drain_wait.h). Incidents are rare, so the wakeup's cost
 * (an irq_work) is too. */
static __always_inline void rs_submit_now(void* ring, void* record) {
  bpf_ringbuf_submit(record, BPF_RB_FORCE_WAKEUP);
}

/* Every program comes in two flavours, picked by the loader:
 * - tp_btf (handle_NAME): the kernel passes typed task pointers, which the
 *   verifier trusts, so fields are read directly. A bpf_probe_read_kernel
 *   call instead measured 30+ ns more on the wakeup path.
 * - raw_tp (handle_NAME_raw): for a kernel that does not expose its own BTF
 *   (no /sys/kernel/btf/vmlinux), where tp_btf cannot attach. CO-RE then
 *   relocates against an external BTF file (bpf_config.btf_path), and the
 *   arguments are plain numbers, read with bpf_probe_read_kernel.
 * `raw` is a constant at every call of the always-inline helpers that take
 * it, so the compiler keeps only one of the two reads. */
#define RS_READ(raw, p, field) ((raw) ? BPF_CORE_READ(p, field) : (p)->field)

/* Copies a task's comm (RS_TASK_COMM_LEN bytes) into `dst`. */
#define RS_READ_COMM(raw, dst, t)                         \
  do {                                                    \
    if (raw) {                                            \
      bpf_core_read(dst, RS_TASK_COMM_LEN, &(t)->comm);   \
    } else {                                              \
      __builtin_memcpy(dst, (t)->comm, RS_TASK_COMM_LEN); \
    }                                                     \
  } while (0)

/* The CPU a task is queued on; the field moved into thread_info in 5.16.
 * preserve_access_index: vmlinux.h's pragma covers only its own types, and
 * without a CO-RE relocation a direct read of this one would be at offset 0. */
struct task_struct___pre_5_16 {
  unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __s32 rs_task_cpu(bool raw, struct task_struct* t) {
  if (bpf_core_field_exists(t->thread_info.cpu)) return RS_READ(raw, t, thread_info.cpu);
  return RS_READ(raw, (struct task_struct___pre_5_16*)t, cpu);
}

/* A task's raw state: `__state` since 5.14, `state` (a long) before. */
struct task_struct___pre_5_14 {
  long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 rs_task_state(bool raw, struct task_struct* t) {
  if (bpf_core_field_exists(t->__state)) return RS_READ(raw, t, __state);
  return (__u32)RS_READ(raw, (struct task_struct___pre_5_14*)t, state);
}

#endif /* RINGSIDE_BPF_RINGS_BPF_H_ */
