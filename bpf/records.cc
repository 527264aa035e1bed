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

// The bytes of a well-formed record that are its own: its layout, or the
// whole record for a stack's, whose frames follow it.
size_t OwnBytes(const RecordView& view, size_t layout) {
  rs_event_header h;
  std::memcpy(&h, view.data, sizeof(h));
  const bool frames = h.type == RS_EV_STACK_BLOCKED || h.type == RS_EV_STACK_CPU_SAMPLE;
  return frames ? view.size : layout;
}

// Whether a record can be read where it lies: at the alignment of every
// record layout (8 bytes).
bool Aligned(const RecordView& view) {
  return reinterpret_cast<uintptr_t>(view.data) % alignof(uint64_t) == 0;
}

}  // namespace

size_t RecordBatch::Decode(absl::Span<const RecordView> views) {
  // A record 8-byte aligned where it lies (every record a BPF ring hands
  // out: the ring's records and a batch's are whole multiples of 8) is read
  // there, which saved 3-4 of the 24 ns an event costs the bundle writer
  // (pipeline_benchmark). Others are copied, at the type's layout only (a
  // longer record's tail is no reader's business) but for stacks, whose
  // frames follow, into the arena, sized first so that no pointer into it
  // moves.
  size_t words = 0, dropped = 0;
  for (const RecordView& v : views) {
    if (Aligned(v)) continue;
    if (const size_t layout = CheckedLayout(v); layout != 0) words += (OwnBytes(v, layout) + 7) / 8;
  }
  arena_.resize(words);
  records_.clear();
  incidents_ = 0;
  types_ = 0;
  static_assert(RS_EV_MAX <= 32, "types_ has a bit per record type");
  uint64_t* next = arena_.data();
  for (const RecordView& v : views) {
    const size_t layout = CheckedLayout(v);
    if (layout == 0) {
      dropped++;
      continue;
    }
    rs_event_header h;
    std::memcpy(&h, v.data, sizeof(h));
    if (Aligned(v)) {
      records_.push_back(Record{h.type, v.data});
    } else {
      const size_t bytes = OwnBytes(v, layout);
      std::memcpy(next, v.data, bytes);
      records_.push_back(Record{h.type, next});
      next += (bytes + 7) / 8;
    }
    incidents_ += FindEventType(h.type)->incident;
    types_ |= 1u << h.type;
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
