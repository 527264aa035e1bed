// TraceBuffer: the ring's room. A chunk's space is taken at the write
// position; in a ring, the chunks it lands on are deleted first (their
// losses counted), and a wrap pads the tail it leaves. The writes that ask
// for room are in trace_buffer.cc.

#include <algorithm>
#include <cstring>

#include "buffer/internal/trace_buffer_memory.h"
#include "buffer/trace_buffer.h"

namespace ringside::buffer {

bool TraceBuffer::NextAllocationErases(uint32_t offset, uint32_t outer_size) const {
  if (policy_ == OverwritePolicy::kDiscard || outer_size > size_) return false;
  if (wr_ + uint64_t{outer_size} > size_) {
    // The wrap erases the whole older lap, then [0, outer_size).
    return offset >= wr_ || offset < outer_size;
  }
  return data_end_ > wr_ && offset >= wr_ && offset < wr_ + outer_size;
}

int64_t TraceBuffer::AllocateChunk(uint32_t outer_size, uint32_t* next_record) {
  *next_record = static_cast<uint32_t>(size_);  // None, unless the ring has wrapped.
  if (policy_ == OverwritePolicy::kDiscard) {
    if (discard_full_ || wr_ + uint64_t{outer_size} > size_) {
      discard_full_ = true;
      return -1;
    }
    const uint32_t offset = wr_;
    PreserveForClone(offset, outer_size);
    wr_ += outer_size;
    data_end_ = wr_;
    used_size_ = std::max<size_t>(used_size_, wr_);
    return offset;
  }
  if (outer_size > size_) return -1;
  // What the chunk will be written over (the chunks erased to make room are
  // preserved as they are changed).
  PreserveForClone(wr_ + uint64_t{outer_size} > size_ ? 0 : wr_, outer_size);
  if (wr_ + uint64_t{outer_size} > size_) {
    // Wrap: what is left of the older lap above wr_ is the oldest data.
    if (data_end_ > wr_) DeleteRange(wr_, data_end_);
    data_end_ = wr_;
    wr_ = 0;
    stats_.write_wrap_count++;
  }
  const uint32_t offset = wr_;
  const uint32_t end = wr_ + outer_size;
  *next_record = end;
  if (data_end_ > wr_) {
    const uint32_t deleted_to = DeleteRange(wr_, std::min(end, data_end_));
    if (deleted_to > end) {
      WritePadding(end, deleted_to - end);
      *next_record = deleted_to;  // Past the padding just written, still in cache.
    }
  }
  wr_ = end;
  if (wr_ > data_end_) data_end_ = wr_;
  used_size_ = std::max<size_t>(used_size_, wr_);
  // The next write starts by reading that record's header: fetch it now,
  // while this chunk is copied and checked.
  if (*next_record < data_end_) __builtin_prefetch(ChunkAt(*next_record));
  return offset;
}

uint32_t TraceBuffer::DeleteRange(uint32_t begin, uint32_t end) {
  uint32_t offset = begin;
  while (offset < end) {
    const uint32_t word = FirstWordAt(offset);
    const uint32_t outer = word & kSizeMask;
    // Chunks of different sizes rarely line up with the new one: fetch the
    // header after this record while this one is deleted.
    if (offset + outer < end) __builtin_prefetch(memory_ + offset + outer);
    if (word & kPaddingBit) {
      if ((word & kTransientBit) == 0) stats_.padding_bytes_cleared += outer;
    } else if ((ChunkAt(offset)->flags & kErased) == 0) {
      DeleteChunk(offset);
    }
    offset += outer;
  }
  return offset;
}

void TraceBuffer::DeleteChunk(uint32_t offset) {
  TBChunk* c = MutableChunkAt(offset);
  SequenceState* seq = FindSequence(c->producer_id, c->writer_id);
  if (seq == nullptr) {  // Cannot happen: live chunks keep their sequence.
    c->flags |= kErased;
    return;
  }
  if (observer_) {
    // Reconstruct every packet in sequence order for the observer.
    PacketSequenceProperties props{seq->producer_id, seq->identity, seq->writer_id};
    while (ReadInSequence(*seq, offset, Mode::kErase, &observer_packet_)) {
      observer_(props, observer_packet_);
    }
    return;
  }
  // Nobody wants the packets: drop whole chunks, in sequence order up to the
  // target, without tokenizing them. The losses are the same; a packet that
  // continued into a surviving chunk is reported there as an orphan.
  while (!seq->chunks.empty()) {
    // Usually the target is the front. Only its offset says so: a hostile
    // producer can get a ChunkID into a queue twice.
    const uint32_t front_offset = seq->chunks.front().offset;
    const bool is_target = front_offset == offset;
    TBChunk* front = is_target ? c : MutableChunkAt(front_offset);
    CheckForGap(*seq, front);
    if (front->payload_consumed < front->payload_size)
      Consume(*seq, front, front->payload_size, Mode::kErase);
    if (front->flags & kCorrupted) ReportCorruption(*seq, front);
    PopFrontChunk(*seq, front, Mode::kErase);
    if (is_target) break;
  }
}

void TraceBuffer::WritePadding(uint32_t offset, uint32_t size) {
  const uint32_t word = size | kPaddingBit;
  std::memcpy(WritableBytes(offset, sizeof(word)), &word, sizeof(word));
  stats_.padding_bytes_written += size;
}

}  // namespace ringside::buffer
