#include "bpf/records.h"

#include <algorithm>
#include <cstring>

namespace ringside::bpf {
namespace {

// Bytes of the fixed layout of each record type (0: unknown type).
size_t LayoutSize(uint32_t type) {
  switch (type) {
    case RS_EV_SCHED_SWITCH:
      return sizeof(rs_sched_switch);
    case RS_EV_SCHED_WAKEUP:
    case RS_EV_SCHED_WAKEUP_NEW:
      return sizeof(rs_sched_wakeup);
    case RS_EV_SCHED_MIGRATE:
      return sizeof(rs_sched_migrate);
    case RS_EV_PROCESS_FORK:
      return sizeof(rs_process_fork);
    case RS_EV_PROCESS_EXEC:
      return sizeof(rs_process_exec);
    case RS_EV_PROCESS_EXIT:
      return sizeof(rs_process_exit);
    case RS_EV_TASK_RENAME:
      return sizeof(rs_task_rename);
    case RS_EV_OOM_KILL:
      return sizeof(rs_oom_kill);
    case RS_EV_FATAL_SIGNAL:
      return sizeof(rs_fatal_signal);
    case RS_EV_CORE_DUMP:
      return sizeof(rs_core_dump);
    default:
      return 0;
  }
}

}  // namespace

bool DecodeRecord(const RecordView& view, Record* out) {
  rs_event_header h;
  if (view.size < sizeof(h)) return false;
  std::memcpy(&h, view.data, sizeof(h));
  const size_t layout = LayoutSize(h.type);
  if (layout == 0 || h.size != view.size || view.size < layout) return false;
  out->type = h.type;
  // Only the type's layout: a longer record's tail is not ours to read.
  std::memcpy(static_cast<void*>(&out->header), view.data, layout);
  return true;
}

std::string_view CommOf(const char (&comm)[RS_TASK_COMM_LEN]) {
  return std::string_view(comm, strnlen(comm, RS_TASK_COMM_LEN));
}

std::string_view ExecFilename(const rs_process_exec& e) {
  return std::string_view(e.filename, std::min<size_t>(e.filename_len, RS_FILENAME_LEN - 1));
}

std::string_view ExecArgv(const rs_process_exec& e) {
  return std::string_view(e.argv, std::min<size_t>(e.argv_len, RS_ARGV_LEN));
}

}  // namespace ringside::bpf
