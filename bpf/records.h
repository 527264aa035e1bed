#ifndef RINGSIDE_BPF_RECORDS_H_
#define RINGSIDE_BPF_RECORDS_H_

#include <cstdint>
#include <string_view>

#include "bpf/common_events.h"
#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/ring_reader.h"
#include "bpf/sched_events.h"

namespace ringside::bpf {

// One record of the staging rings, checked and copied out once (the ring
// holds it unaligned), so that every reader of a batch (the bundle writer,
// the descriptor tracker) uses the same typed view and none decodes again.
struct Record {
  uint32_t type = 0;  // enum rs_event_type; selects the union member.
  union {
    rs_event_header header;  // Of every type.
    rs_sched_switch sched_switch;
    rs_sched_wakeup wakeup;  // RS_EV_SCHED_WAKEUP and RS_EV_SCHED_WAKEUP_NEW.
    rs_sched_migrate migrate;
    rs_process_fork fork;
    rs_process_exec exec;
    rs_process_exit exit;
    rs_task_rename rename;
    rs_oom_kill oom_kill;
    rs_fatal_signal fatal_signal;
    rs_core_dump core_dump;
  };
  Record() : header{} {}
};

// Decodes `view` into *out. False for a malformed record: a type this
// build does not know, a size in the header other than the record's, or a
// record shorter than its type's layout. Never reads past `view.size`.
bool DecodeRecord(const RecordView& view, Record* out);

// A task name from a record: up to its NUL, at most RS_TASK_COMM_LEN.
std::string_view CommOf(const char (&comm)[RS_TASK_COMM_LEN]);
// The exec record's file name and NUL-separated argv, bounded by their
// length fields and the arrays.
std::string_view ExecFilename(const rs_process_exec& e);
std::string_view ExecArgv(const rs_process_exec& e);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_RECORDS_H_
