#ifndef RINGSIDE_BPF_RECORDS_H_
#define RINGSIDE_BPF_RECORDS_H_

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

#include "bpf/common_events.h"
#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/ring_reader.h"
#include "bpf/sched_events.h"
#include "bpf/stack_events.h"

namespace ringside::bpf {

// One record of the staging rings, checked once, so that every reader of a
// batch (the bundle writer, the descriptor tracker) uses the same typed
// view and none decodes again. `data` points at the record where it lies
// (8-byte aligned, as a BPF ring holds every record) or at its copy in the
// RecordBatch that decoded it; the accessor matching `type` is the one to
// use.
struct Record {
  uint32_t type = 0;  // enum rs_event_type.
  const void* data = nullptr;

  const rs_event_header& header() const { return As<rs_event_header>(); }
  const rs_sched_switch& sched_switch() const { return As<rs_sched_switch>(); }
  // RS_EV_SCHED_WAKING and RS_EV_SCHED_WAKEUP_NEW.
  const rs_sched_wakeup& wakeup() const { return As<rs_sched_wakeup>(); }
  const rs_sched_migrate& migrate() const { return As<rs_sched_migrate>(); }
  const rs_process_fork& fork() const { return As<rs_process_fork>(); }
  const rs_process_exec& exec() const { return As<rs_process_exec>(); }
  const rs_process_exit& exit() const { return As<rs_process_exit>(); }
  const rs_task_rename& rename() const { return As<rs_task_rename>(); }
  const rs_process_free& process_free() const { return As<rs_process_free>(); }
  const rs_oom_kill& oom_kill() const { return As<rs_oom_kill>(); }
  const rs_fatal_signal& fatal_signal() const { return As<rs_fatal_signal>(); }
  const rs_core_dump& core_dump() const { return As<rs_core_dump>(); }
  // RS_EV_TASK_BLOCKED and RS_EV_RUNQUEUE_DELAY.
  const rs_task_stall& task_stall() const { return As<rs_task_stall>(); }
  const rs_stack_blocked& stack_blocked() const { return As<rs_stack_blocked>(); }
  const rs_stack_cpu_sample& stack_cpu_sample() const { return As<rs_stack_cpu_sample>(); }

 private:
  template <typename T>
  const T& As() const {
    return *static_cast<const T*>(data);
  }
};

// The well-formed records of one batch. A record that lies 8-byte aligned
// is read in place: a ring's records cannot change once submitted, and the
// reader moves past them only after its callback, so they stay valid for
// the whole callback that decodes them. Any other is copied at its own
// size into one aligned arena. Records are valid until the next Decode()
// and while the views' bytes are. Not thread-safe.
class RecordBatch {
 public:
  // Decodes `views`, dropping malformed records: a type this build does not
  // know, a size in the header other than the record's, or a record shorter
  // than its type's layout. Returns how many were dropped. Never reads past
  // a view's size.
  size_t Decode(absl::Span<const RecordView> views);

  absl::Span<const Record> records() const { return absl::MakeConstSpan(records_.data(), count_); }
  // How many of them are incidents (OOM kill, fatal signal, core dump, stall):
  // rare, so a reader that only wants those skips most batches whole.
  size_t incidents() const { return incidents_; }
  // Whether any record is of one of `types` (RS_EV_*): a reader that wants
  // only some kinds (stacks, process lifecycle) skips other batches whole.
  bool HasAnyOf(std::initializer_list<uint32_t> types) const {
    uint32_t mask = 0;
    for (uint32_t t : types) mask |= t < 32 ? 1u << t : 0;
    return (types_ & mask) != 0;
  }

 private:
  size_t DecodeCopying(absl::Span<const RecordView> views);

  std::vector<Record> records_;  // The first count_; grown, never shrunk.
  size_t count_ = 0;
  size_t incidents_ = 0;
  uint32_t types_ = 0;           // Bit t: a record of type t.
  std::vector<uint64_t> arena_;  // 8-byte words: every record layout's alignment.
};

// A stall record's length: from since_ns to the record's time (0 should a
// clock read out of order put since_ns after it).
inline uint64_t StalledNs(const rs_task_stall& e) {
  return e.h.ts_ns > e.since_ns ? e.h.ts_ns - e.since_ns : 0;
}

// Decodes one record into a batch of its own (for tests and odd callers).
bool DecodeRecord(const RecordView& view, RecordBatch* out);

// A task name from a record: up to its NUL, at most RS_TASK_COMM_LEN.
std::string_view CommOf(const char (&comm)[RS_TASK_COMM_LEN]);
// The exec record's file name and NUL-separated argv, bounded by their
// length fields and the arrays.
std::string_view ExecFilename(const rs_process_exec& e);
std::string_view ExecArgv(const rs_process_exec& e);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_RECORDS_H_
