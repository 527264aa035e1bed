#include "bpf/records.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "bpf/event_types.h"

namespace ringside::bpf {
namespace {

// Each type's fixed layout in bytes, by type (0: a type no program
// writes), and the incident types as bits: what the decoder looks up per
// record, in two small tables instead of a row of kEventTypes each.
constexpr std::array<uint32_t, RS_EV_MAX> kLayoutOf = [] {
  std::array<uint32_t, RS_EV_MAX> by_type{};
  for (const EventType& e : kEventTypes) by_type[e.type] = static_cast<uint32_t>(e.size);
  return by_type;
}();
static_assert(RS_EV_MAX <= 32, "a type is a bit of a uint32_t");
constexpr uint32_t kIncidentTypes = [] {
  uint32_t bits = 0;
  for (const EventType& e : kEventTypes) bits |= e.incident ? 1u << e.type : 0;
  return bits;
}();

// The layout size of a well-formed record whose header is `h`, else 0.
size_t CheckedLayout(const RecordView& view, const rs_event_header& h) {
  const size_t layout = h.type < RS_EV_MAX ? kLayoutOf[h.type] : 0;
  if (layout == 0 || h.size != view.size || view.size < layout) return 0;
  return layout;
}

// The layout size of a well-formed record, else 0.
size_t CheckedLayout(const RecordView& view) {
  rs_event_header h;
  if (view.size < sizeof(h)) return 0;
  std::memcpy(&h, view.data, sizeof(h));
  return CheckedLayout(view, h);
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
  // there, in one pass that checks each header once. Should a view lie
  // elsewhere (never from a ring), DecodeCopying() starts over.
  if (records_.size() < views.size()) records_.resize(views.size());
  Record* out = records_.data();
  size_t n = 0, dropped = 0;
  uint32_t types = 0, incidents = 0;
  for (const RecordView& v : views) {
    if (!Aligned(v)) return DecodeCopying(views);
    rs_event_header h;
    if (v.size < sizeof(h)) {
      dropped++;
      continue;
    }
    std::memcpy(&h, v.data, sizeof(h));
    if (CheckedLayout(v, h) == 0) {
      dropped++;
      continue;
    }
    out[n++] = Record{h.type, v.data};
    types |= 1u << h.type;
    incidents += (kIncidentTypes >> h.type) & 1;
  }
  count_ = n;
  types_ = types;
  incidents_ = incidents;
  return dropped;
}

size_t RecordBatch::DecodeCopying(absl::Span<const RecordView> views) {
  // Decode() sized records_ for every view. Aligned views are read in
  // place; the others are copied, at the type's layout only (a longer
  // record's tail is no reader's business) but for stacks, whose frames
  // follow, into the arena, sized first so that no pointer into it moves.
  size_t words = 0, dropped = 0;
  for (const RecordView& v : views) {
    if (Aligned(v)) continue;
    if (const size_t layout = CheckedLayout(v); layout != 0) words += (OwnBytes(v, layout) + 7) / 8;
  }
  arena_.resize(words);
  count_ = 0;
  incidents_ = 0;
  types_ = 0;
  uint64_t* next = arena_.data();
  for (const RecordView& v : views) {
    const size_t layout = CheckedLayout(v);
    if (layout == 0) {
      dropped++;
      continue;
    }
    rs_event_header h;
    std::memcpy(&h, v.data, sizeof(h));
    const void* data = v.data;
    if (!Aligned(v)) {
      const size_t bytes = OwnBytes(v, layout);
      std::memcpy(next, v.data, bytes);
      data = next;
      next += (bytes + 7) / 8;
    }
    records_[count_++] = Record{h.type, data};
    incidents_ += (kIncidentTypes >> h.type) & 1;
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
