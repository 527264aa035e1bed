// SPDX-License-Identifier: GPL-2.0
/* Scheduling events into per-CPU ring buffers: one BPF ring buffer per CPU
 * (an array of maps indexed by the current CPU), so records of a CPU stay in
 * order and CPUs never contend. Every reserve failure is counted per CPU and
 * event type. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/sched_events.h"

char LICENSE[] SEC("license") = "GPL";

struct ring {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20); /* Set from userspace before load. */
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, RS_MAX_CPUS);
  __type(key, __u32);
  __array(values, struct ring);
} rings SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, RS_EV_MAX);
  __type(key, __u32);
  __type(value, __u64);
} drops SEC(".maps");

static __always_inline void count_drop(__u32 type) {
  __u64* n = bpf_map_lookup_elem(&drops, &type);
  if (n) *n += 1;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  __u32 cpu = bpf_get_smp_processor_id();
  void* ring = bpf_map_lookup_elem(&rings, &cpu);
  if (!ring) return 0;
  struct rs_sched_switch* e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
  if (!e) {
    count_drop(RS_EV_SCHED_SWITCH);
    return 0;
  }
  e->h.type = RS_EV_SCHED_SWITCH;
  e->h.size = sizeof(*e);
  e->h.cpu = cpu;
  e->h.ts_ns = bpf_ktime_get_boot_ns();
  e->prev_pid = prev->pid;
  e->prev_tgid = prev->tgid;
  e->next_pid = next->pid;
  e->next_tgid = next->tgid;
  e->prev_prio = prev->prio;
  e->next_prio = next->prio;
  e->prev_state = prev_state;
  __builtin_memcpy(e->prev_comm, prev->comm, RS_TASK_COMM_LEN);
  __builtin_memcpy(e->next_comm, next->comm, RS_TASK_COMM_LEN);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
