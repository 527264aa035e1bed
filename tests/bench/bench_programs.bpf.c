// SPDX-License-Identifier: GPL-2.0
/* Programs for the bpf/ benchmarks only: a filler that writes sched_switch
 * records into the shared rings at kernel speed (run with
 * BPF_PROG_TEST_RUN on a chosen CPU), and an empty sched_switch program
 * whose cost is the baseline for ours. */
#include "bpf/rings.bpf.h"

#include "bpf/sched_events.h"

char LICENSE[] SEC("license") = "GPL";

static long fill_one(__u32 i, void* ctx) {
  struct rs_sched_switch* e = rs_reserve(RS_EV_SCHED_SWITCH, sizeof(*e));
  if (!e) return 1;
  e->prev_pid = i;
  e->prev_tgid = i;
  e->next_pid = i + 1;
  e->next_tgid = i + 1;
  e->prev_prio = 120;
  e->next_prio = 120;
  e->prev_state = 1;
  __builtin_memset(e->prev_comm, 'a', RS_TASK_COMM_LEN);
  __builtin_memset(e->next_comm, 'b', RS_TASK_COMM_LEN);
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
  return 0;
}

/* args[0]: how many records. */
SEC("raw_tp")
int fill_ring(struct bpf_raw_tracepoint_args* ctx) {
  bpf_loop((__u32)ctx->args[0], fill_one, NULL, 0);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(empty_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return 0;
}

/* Steps of handle_sched_switch on their own, to see where its time goes. */
SEC("tp_btf/sched_switch")
int BPF_PROG(step_clock, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return bpf_ktime_get_boot_ns() == 0;
}

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20);
} step_ring SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(step_reserve_submit, bool preempt, struct task_struct* prev,
             struct task_struct* next) {
  struct rs_sched_switch* e = bpf_ringbuf_reserve(&step_ring, sizeof(*e), 0);
  if (!e) return 0;
  e->h.type = 0;
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(step_query, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return bpf_ringbuf_query(&step_ring, BPF_RB_AVAIL_DATA) >
         bpf_ringbuf_query(&step_ring, BPF_RB_RING_SIZE);
}
