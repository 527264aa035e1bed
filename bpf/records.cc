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
    case RS_EV_SCHED_WAKING:
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

// The layout size of a well-formed record, else 0.
size_t CheckedLayout(const RecordView& view) {
  rs_event_header h;
  if (view.size < sizeof(h)) return 0;
  std::memcpy(&h, view.data, sizeof(h));
  const size_t layout = LayoutSize(h.type);
  if (layout == 0 || h.size != view.size || view.size < layout) return 0;
  return layout;
}

}  // namespace

size_t RecordBatch::Decode(absl::Span<const RecordView> views) {
  // First the sizes, so the arena is sized once and no pointer into it
  // moves; then the copies, of the type's layout only (a longer record's
  // tail is not ours to read).
  size_t words = 0, dropped = 0;
  for (const RecordView& v : views) words += (CheckedLayout(v) + 7) / 8;
  arena_.resize(words);
  records_.clear();
  incidents_ = 0;
  uint64_t* next = arena_.data();
  for (const RecordView& v : views) {
    const size_t layout = CheckedLayout(v);
    if (layout == 0) {
      dropped++;
      continue;
    }
    std::memcpy(next, v.data, layout);
    rs_event_header h;
    std::memcpy(&h, v.data, sizeof(h));
    records_.push_back(Record{h.type, next});
    incidents_ +=
        h.type == RS_EV_OOM_KILL || h.type == RS_EV_FATAL_SIGNAL || h.type == RS_EV_CORE_DUMP;
    next += (layout + 7) / 8;
  }
  return dropped;
}

bool DecodeRecord(const RecordView& view, RecordBatch* out) {
  return out->Decode(absl::Span<const RecordView>(&view, 1)) == 0;
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
