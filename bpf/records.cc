#include "bpf/records.h"

#include <algorithm>
#include <cstring>

#include "bpf/event_types.h"

namespace ringside::bpf {
namespace {

// Bytes of the fixed layout of each record type (0: unknown type).
size_t LayoutSize(uint32_t type) {
  const EventType* t = FindEventType(type);
  return t == nullptr ? 0 : t->size;
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
    incidents_ += FindEventType(h.type)->incident;
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
