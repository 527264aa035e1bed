#ifndef RINGSIDE_AGENT_WRITER_TRACE_WRITER_H_
#define RINGSIDE_AGENT_WRITER_TRACE_WRITER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/writer/chunk_pool.h"
#include "buffer/chunk_abi.h"
#include "buffer/wire_format.h"

namespace ringside::agent {

class TraceWriter;

// A length field left open in a committed chunk, to be sent as a patch.
struct PendingPatch {
  buffer::ChunkID chunk_id = 0;
  uint32_t offset = 0;  // From the chunk's payload start.
  uint8_t data[4] = {};
  bool final = false;  // The message ended: the value is known.
};

// A protobuf message being written in wire format straight into chunks: the
// root TracePacket or a nested message of it. Obtained from
// TraceWriter::NewTracePacket() and BeginNested(); never allocates.
//
// A nested message's length is reserved as a 4-byte redundant varint and
// filled in when the message ends (EndNested(), or when a field is appended to
// an enclosing message). If its chunk was committed meanwhile, the length goes
// out as a patch.
class ProtoMessage {
 public:
  inline void AppendVarInt(uint32_t field, uint64_t value);
  // int32/int64 fields: negative values take 10 bytes, as in protobuf.
  void AppendInt(uint32_t field, int64_t value) {
    AppendVarInt(field, static_cast<uint64_t>(value));
  }
  void AppendBool(uint32_t field, bool value) { AppendVarInt(field, value ? 1 : 0); }
  void AppendFixed32(uint32_t field, uint32_t value);
  void AppendFixed64(uint32_t field, uint64_t value);
  inline void AppendBytes(uint32_t field, const void* data, size_t size);
  void AppendString(uint32_t field, absl::string_view s) { AppendBytes(field, s.data(), s.size()); }
  // A packed repeated varint field (e.g. compact_sched's columns).
  template <typename T>
  void AppendPackedVarInts(uint32_t field, const T* values, size_t count);
  // The same of one member of each of `count` items: `get(items[i])`.
  template <typename Item, typename Get>
  void AppendPackedVarInts(uint32_t field, const Item* items, size_t count, Get get);

  // Starts a nested message in `field`; it ends with EndNested() on it, or
  // when anything is appended to this message again.
  inline ProtoMessage* BeginNested(uint32_t field);
  void EndNested();

 private:
  friend class TraceWriter;
  inline void AppendRawVarInt(uint64_t value);
  inline void Prepare();  // Ends open nested messages below this one.
  ProtoMessage* BeginNestedSlow(uint32_t field);
  void AppendBytesSlow(uint32_t field, const void* data, size_t size);
  void AppendVarIntSlow(uint32_t field, uint64_t value);
  void AppendRawVarIntSlow(uint64_t value);

  TraceWriter* writer_ = nullptr;
  int depth_ = 0;
  // Where the 4-byte length goes: in a chunk, or in a pending patch once that
  // chunk has been committed. Null for the root (its length is the fragment's).
  uint8_t* size_field_ = nullptr;
  // Set when size_field_ has moved into a pending patch.
  PendingPatch* patch_ = nullptr;
  // Writer's logical byte count just after the length field.
  uint64_t begin_total_ = 0;
};

// Writes TracePackets of one sequence {producer, writer_id} into the chunks of
// a ProducerBuffer, following the chunk ABI: a packet that does not fit its
// chunk continues as a fragment in the next one (flags on both chunks), and
// lengths left open in a committed chunk are sent as patches. Full chunks are
// committed as they fill; Flush() commits the partial one.
//
// Incremental state: the first packet after ClearIncrementalState() (or
// RequestIncrementalStateClear() from another thread) carries
// SEQ_INCREMENTAL_STATE_CLEARED, and the interning tables start over.
//
// Threading: one thread writes; RequestIncrementalStateClear() and the
// ProducerBuffer's scraping may come from others.
class TraceWriter {
 public:
  static constexpr int kMaxNestingDepth = 16;

  struct Stats {
    uint64_t packets_written = 0;
    uint64_t packets_dropped = 0;  // Lost because no chunk was available.
    uint64_t chunks_committed = 0;
    uint64_t patches_sent = 0;
    uint64_t bytes_written = 0;  // Packet bytes, fragment headers excluded.
  };

  // Finishes the packet when it goes out of scope.
  class PacketHandle {
   public:
    explicit PacketHandle(TraceWriter* writer) : writer_(writer) {}
    PacketHandle(PacketHandle&& other) noexcept : writer_(other.writer_) {
      other.writer_ = nullptr;
    }
    PacketHandle& operator=(PacketHandle&&) = delete;
    ~PacketHandle() {
      if (writer_) writer_->FinishTracePacket();
    }
    ProtoMessage* operator->() { return &writer_->nests_[0]; }
    ProtoMessage* get() { return &writer_->nests_[0]; }

   private:
    TraceWriter* writer_;
  };

  // Writes through `producer`'s chunks (ProducerBuffer::CreateTraceWriter
  // makes writers and registers them for scraping).
  TraceWriter(ChunkPool* producer, buffer::WriterID writer_id);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts a packet (finishing any open one). The packet already carries the
  // sequence bookkeeping: first_packet_on_sequence on the first one,
  // sequence_flags with SEQ_INCREMENTAL_STATE_CLEARED after a clear.
  // `needs_incremental_state`: the packet refers to interned data
  // (SEQ_NEEDS_INCREMENTAL_STATE).
  PacketHandle NewTracePacket(bool needs_incremental_state = false);
  void FinishTracePacket();

  // Commits the chunk being written (even partly filled) and every patch
  // whose value is known.
  void Flush();

  // Interning: returns the id of `s` in table `interned_data_field` (a field
  // number of InternedData) and sets *is_new when the caller must emit the
  // entry in this packet's interned_data.
  uint64_t Intern(uint32_t interned_data_field, std::string_view s, bool* is_new);
  void ClearIncrementalState();
  // The sequence's interned data is not written by this writer but beside
  // it (the durable store's, StackSampleWriter): its packets never say they
  // clear the incremental state, which would drop that data in a reader.
  void LeaveIncrementalStateToOthers() {
    state_elsewhere_ = true;
    state_cleared_ = false;
  }
  void RequestIncrementalStateClear() { clear_requested_.store(true, std::memory_order_relaxed); }
  // True when the current packet is the first since the state was cleared.
  bool incremental_state_cleared() const { return state_cleared_for_packet_; }

  buffer::WriterID writer_id() const { return writer_id_; }
  Stats stats() const { return stats_; }

 private:
  friend class ProtoMessage;
  friend class ProducerBuffer;

  // The byte stream over chunks.
  void WriteBytes(const uint8_t* data, size_t size);
  // Returns 4 contiguous bytes for a length field, switching chunk if needed.
  uint8_t* ReserveSizeField();
  uint64_t logical_total() const { return base_total_ + static_cast<uint64_t>(cur_ - base_ptr_); }
  // Moves to a new chunk in the middle of a packet (or between packets).
  void SwitchChunk(bool packet_open);
  void CommitCurrentChunk() ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk_mu_);
  // Gets a new chunk (or enters drop mode when none is free). `continuing`:
  // the open packet goes on in it.
  void AcquireChunk(bool continuing);
  void BeginFragment();
  void EnterDropMode();
  void SendFinalPatches();
  inline void EndNestedAbove(int depth);
  inline void FinishNest(ProtoMessage* m);
  void PublishForScraping();
  // Called by ProducerBuffer::ScrapeWriters().
  void Scrape();

  ChunkPool* const producer_;
  const size_t chunk_size_;  // producer_->chunk_size(), read once.
  const buffer::WriterID writer_id_;

  // The chunk being written. `chunk_` is null between chunks and in drop
  // mode, where writes go to `scratch_` and are thrown away.
  absl::Mutex chunk_mu_;
  uint8_t* chunk_ ABSL_GUARDED_BY(chunk_mu_) = nullptr;
  buffer::ChunkID chunk_id_ ABSL_GUARDED_BY(chunk_mu_) = 0;
  uint8_t chunk_flags_ ABSL_GUARDED_BY(chunk_mu_) = 0;
  uint16_t fragments_ = 0;
  uint8_t* cur_ = nullptr;
  uint8_t* end_ = nullptr;
  uint8_t* base_ptr_ = nullptr;  // cur_ at the time base_total_ was taken.
  uint64_t base_total_ = 0;
  uint8_t* fragment_header_ = nullptr;  // Size field of the open fragment.
  bool packet_open_ = false;
  bool dropping_ = false;              // The open packet is being thrown away.
  bool lost_packets_ = false;          // A drop marker is owed to the next chunk.
  bool last_chunk_continued_ = false;  // The last committed chunk ended mid-packet.
  bool first_packet_ = true;
  std::unique_ptr<uint8_t[]> scratch_;

  // Scraping: bytes and fragments of the current chunk that hold complete
  // packets, published by the writer after each packet.
  std::atomic<uint64_t> published_{0};  // bytes << 16 | fragments

  ProtoMessage nests_[kMaxNestingDepth];
  int depth_ = 0;  // Deepest open message; 0 = the packet.
  std::deque<PendingPatch> patches_;

  // Interning and incremental state: per InternedData field, string -> iid.
  // Ids are never reused, even after a clear.
  absl::flat_hash_map<uint32_t, absl::flat_hash_map<std::string, uint64_t>> interned_;
  absl::flat_hash_map<uint32_t, uint64_t> next_iid_;
  std::atomic<bool> clear_requested_{false};
  bool state_cleared_ = true;
  bool state_elsewhere_ = false;  // LeaveIncrementalStateToOthers().
  bool state_cleared_for_packet_ = false;

  Stats stats_;
};

// --- Inline fast paths: a field that fits the current chunk is written in
// place; anything else takes the out-of-line path.

// Room a field needs in the current chunk to take the inline path.
inline constexpr ptrdiff_t kInlineVarIntFieldRoom = buffer::kMaxTagSize + buffer::kMaxVarIntSize;
inline constexpr size_t kInlineMaxBytes = 32;
inline constexpr ptrdiff_t kInlineBytesFieldRoom = buffer::kMaxTagSize + 1 + kInlineMaxBytes;
inline constexpr ptrdiff_t kInlineNestedRoom = buffer::kMaxTagSize + buffer::kRedundantVarIntSize;

inline void ProtoMessage::Prepare() {
  if (writer_->depth_ > depth_) writer_->EndNestedAbove(depth_);
}

inline void ProtoMessage::AppendVarInt(uint32_t field, uint64_t value) {
  Prepare();
  if (writer_->end_ - writer_->cur_ >= kInlineVarIntFieldRoom) {
    uint8_t* p = buffer::WriteTag(field, buffer::WireType::kVarInt, writer_->cur_);
    writer_->cur_ = buffer::WriteVarInt(value, p);
    return;
  }
  AppendVarIntSlow(field, value);
}

// A packed column's value: compact_sched writes five per switch, so this one
// must not be a call and a memcpy per value.
inline void ProtoMessage::AppendRawVarInt(uint64_t value) {
  if (writer_->end_ - writer_->cur_ >= static_cast<ptrdiff_t>(buffer::kMaxVarIntSize)) {
    writer_->cur_ = buffer::WriteVarInt(value, writer_->cur_);
    return;
  }
  AppendRawVarIntSlow(value);
}

template <typename T>
void ProtoMessage::AppendPackedVarInts(uint32_t field, const T* values, size_t count) {
  AppendPackedVarInts(field, values, count, [](const T& v) { return v; });
}

template <typename Item, typename Get>
void ProtoMessage::AppendPackedVarInts(uint32_t field, const Item* items, size_t count, Get get) {
  ProtoMessage* packed = BeginNested(field);
  TraceWriter* w = packed->writer_;
  size_t i = 0;
  while (i < count) {
    // As many values as surely fit in the chunk, with the writer's cursor
    // in a register: stored through a byte pointer, which may alias
    // anything, it would otherwise be stored and loaded again per value.
    const size_t room = static_cast<size_t>(w->end_ - w->cur_) / buffer::kMaxVarIntSize;
    uint8_t* p = w->cur_;
    for (const size_t stop = i + std::min(room, count - i); i < stop; i++) {
      p = buffer::WriteVarInt(static_cast<uint64_t>(get(items[i])), p);
    }
    w->cur_ = p;
    // Less than a varint's worst case left: one value the slow way (on into
    // the next chunk if it must), then on.
    if (i < count) packed->AppendRawVarIntSlow(static_cast<uint64_t>(get(items[i++])));
  }
  packed->EndNested();
}

inline void ProtoMessage::AppendBytes(uint32_t field, const void* data, size_t size) {
  Prepare();
  if (size <= kInlineMaxBytes && writer_->end_ - writer_->cur_ >= kInlineBytesFieldRoom) {
    // Short strings (comms, names): no call into memcpy.
    uint8_t* p = buffer::WriteTag(field, buffer::WireType::kLengthDelimited, writer_->cur_);
    *p++ = static_cast<uint8_t>(size);
    const auto* src = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < size; i++) p[i] = src[i];
    writer_->cur_ = p + size;
    return;
  }
  AppendBytesSlow(field, data, size);
}

inline void TraceWriter::EndNestedAbove(int depth) {
  while (depth_ > depth) FinishNest(&nests_[depth_--]);
}

inline void TraceWriter::FinishNest(ProtoMessage* m) {
  const uint32_t size = static_cast<uint32_t>(logical_total() - m->begin_total_);
  buffer::WriteRedundantVarInt(size, m->size_field_);
  if (m->patch_ != nullptr) m->patch_->final = true;
}

inline ProtoMessage* ProtoMessage::BeginNested(uint32_t field) {
  Prepare();
  const int depth = depth_ + 1;
  if (writer_->end_ - writer_->cur_ >= kInlineNestedRoom && depth < TraceWriter::kMaxNestingDepth) {
    uint8_t* p = buffer::WriteTag(field, buffer::WireType::kLengthDelimited, writer_->cur_);
    ProtoMessage& m = writer_->nests_[depth];
    m.depth_ = depth;
    m.patch_ = nullptr;
    m.size_field_ = p;
    writer_->cur_ = p + buffer::kRedundantVarIntSize;
    m.begin_total_ = writer_->logical_total();
    writer_->depth_ = depth;
    return &m;
  }
  return BeginNestedSlow(field);
}

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_WRITER_TRACE_WRITER_H_
