#ifndef RINGSIDE_BPF_EVENT_TYPES_H_
#define RINGSIDE_BPF_EVENT_TYPES_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "bpf/common_events.h"
#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/sched_events.h"
#include "bpf/stack_events.h"

namespace ringside::bpf {

// The program group that records an event type (bpf_config's switches).
enum class Group : uint8_t { kSched, kProcess, kIncidents };

// One row per record type the BPF programs write: the one place that says
// what a type is. The decoder takes its size from here, the loss reports
// and `ringside list` its name, the source factory the tracepoints each
// group records (so that ftrace leaves them out), and the encoder (agent/
// sources/) the Perfetto event it becomes: the FtraceEvent field named
// `perfetto_event`, found by name in the generated descriptor. A new event
// type is its BPF program, a row here and its encoder.
struct EventType {
  uint32_t type;           // RS_EV_*.
  const char* name;        // The kernel's event name (ringside_core_dump: ours).
  const char* tracepoint;  // "group/name" in tracefs, of the program.
  Group group;
  size_t size;    // The record's fixed layout.
  bool incident;  // Reported to the trigger policy.
  // Whether the program records every hit of `tracepoint` (filters aside),
  // so that an ftrace source beside it must not record it again.
  bool every_hit;
  const char* perfetto_event;  // FtraceEvent's field ("generic": GenericFtraceEvent).
  const char* note;            // What `ringside list` adds to the name.
};

inline constexpr EventType kEventTypes[] = {
    {RS_EV_SCHED_SWITCH, "sched_switch", "sched/sched_switch", Group::kSched,
     sizeof(rs_sched_switch), false, true, "sched_switch",
     "prev_state as the tracepoint reports it"},
    {RS_EV_SCHED_WAKING, "sched_waking", "sched/sched_waking", Group::kSched,
     sizeof(rs_sched_wakeup), false, true, "sched_waking", ""},
    {RS_EV_SCHED_WAKEUP_NEW, "sched_wakeup_new", "sched/sched_wakeup_new", Group::kSched,
     sizeof(rs_sched_wakeup), false, true, "sched_wakeup_new", ""},
    {RS_EV_SCHED_MIGRATE, "sched_migrate_task", "sched/sched_migrate_task", Group::kSched,
     sizeof(rs_sched_migrate), false, true, "sched_migrate_task", ""},
    {RS_EV_PROCESS_FORK, "sched_process_fork", "sched/sched_process_fork", Group::kProcess,
     sizeof(rs_process_fork), false, true, "sched_process_fork", ""},
    {RS_EV_PROCESS_EXEC, "sched_process_exec", "sched/sched_process_exec", Group::kProcess,
     sizeof(rs_process_exec), false, true, "sched_process_exec", "with argv"},
    {RS_EV_PROCESS_EXIT, "sched_process_exit", "sched/sched_process_exit", Group::kProcess,
     sizeof(rs_process_exit), false, true, "sched_process_exit", "with the exit code"},
    {RS_EV_TASK_RENAME, "task_rename", "task/task_rename", Group::kProcess, sizeof(rs_task_rename),
     false, true, "task_rename", ""},
    {RS_EV_PROCESS_FREE, "sched_process_free", "sched/sched_process_free", Group::kProcess,
     sizeof(rs_process_free), false, true, "sched_process_free",
     "a dead task freed: its pid may be reused"},
    {RS_EV_OOM_KILL, "mark_victim", "oom/mark_victim", Group::kIncidents, sizeof(rs_oom_kill), true,
     false, "mark_victim", "OOM kills: victim, cgroup"},
    {RS_EV_FATAL_SIGNAL, "signal_generate", "signal/signal_generate", Group::kIncidents,
     sizeof(rs_fatal_signal), true, false, "signal_generate",
     "fatal signals only: SIGSEGV, SIGBUS, ..."},
    {RS_EV_CORE_DUMP, "ringside_core_dump", "sched/sched_process_exit", Group::kIncidents,
     sizeof(rs_core_dump), true, false, "generic", "core dumps"},
    // Only while a `blocked` or `runqueue_delay` trigger is configured
    // (bpf/stalls.bpf.h): the stalls past its threshold.
    {RS_EV_TASK_BLOCKED, "ringside_task_blocked", "sched/sched_waking", Group::kSched,
     sizeof(rs_task_stall), true, false, "generic",
     "a task long in D, woken at last: with `blocked` triggers"},
    {RS_EV_RUNQUEUE_DELAY, "ringside_runqueue_delay", "sched/sched_switch", Group::kSched,
     sizeof(rs_task_stall), true, false, "generic",
     "a task long runnable before it ran: with `runqueue_delay` triggers"},
    // Not an FtraceEvent: a TracePacket's StackSample (agent/sources/
    // stack_sample_writer.h), when bpf_config.stacks asks for it.
    {RS_EV_STACK_BLOCKED, "blocked_stack", "sched/sched_switch", Group::kSched,
     sizeof(rs_stack_blocked), false, false, "stack_sample",
     "a blocked thread's stacks, weighted by its time off the CPU"},
    {RS_EV_STACK_CPU_SAMPLE, "cpu_sample", "perf/cpu-clock", Group::kSched,
     sizeof(rs_stack_cpu_sample), false, false, "stack_sample",
     "what runs on each CPU, bpf_config.stacks.cpu_hz times a second, with its stacks"},
};

namespace internal {
// Each type's row, by type: the decoder looks one up per record.
constexpr std::array<const EventType*, RS_EV_MAX> IndexEventTypes() {
  std::array<const EventType*, RS_EV_MAX> index{};
  for (const EventType& e : kEventTypes) index[e.type] = &e;
  return index;
}
inline constexpr std::array<const EventType*, RS_EV_MAX> kEventTypeIndex = IndexEventTypes();
}  // namespace internal

// The row of `type`; nullptr for a type no program writes.
constexpr const EventType* FindEventType(uint32_t type) {
  return type < RS_EV_MAX ? internal::kEventTypeIndex[type] : nullptr;
}

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_EVENT_TYPES_H_
