#include "buffer/trace_buffer.h"

#include <algorithm>
#include <cstring>

#include "buffer/internal/trace_buffer_memory.h"

// TraceBuffer: creation, sequences and the writes (commits, recommits,
// patches). The room they take in the ring is in trace_buffer_room.cc, the
// reads in trace_buffer_read.cc, the clone in trace_buffer_clone.cc.

namespace ringside::buffer {
namespace {

// The result of walking a producer's chunk payload once, at commit time.
struct Tokenized {
  uint32_t payload_size = 0;          // Bytes of readable fragments.
  uint32_t last_fragment_offset = 0;  // Where the last readable fragment starts.
  bool corrupted = false;             // A fragment broke the ABI; it and the rest are dropped.
};

// Walks `num_fragments` fragments of `src`. For a scraped (incomplete) chunk
// the last fragment may still be being written: it is neither parsed nor
// counted as readable.
Tokenized Tokenize(const uint8_t* src, size_t size, uint16_t num_fragments, bool complete) {
  Tokenized t;
  const uint8_t* end = src + size;
  const int readable = complete ? num_fragments : num_fragments - 1;
  uint32_t offset = 0;
  for (int i = 0; i < readable; i++) {
    uint32_t fragment_size = 0;
    const size_t header = ReadFragmentSize(src + offset, end, &fragment_size);
    if (header == 0) {
      t.corrupted = true;
      break;
    }
    // Each fragment's offset depends on the size before it: keep the drop
    // marker's check off that chain. Its size never fits (sizes are below
    // 64 KiB), so only a fragment that does not fit can be one.
    uint64_t next = offset + header + uint64_t{fragment_size};
    if (next > size) {
      if (fragment_size != kPacketSizeDropPacket) {
        t.corrupted = true;
        break;
      }
      next = offset + header;
    }
    t.last_fragment_offset = offset;
    offset = static_cast<uint32_t>(next);
  }
  t.payload_size = offset;
  return t;
}

}  // namespace

std::unique_ptr<TraceBuffer> TraceBuffer::Create(size_t size_bytes, OverwritePolicy policy) {
  static_assert(sizeof(TBChunk) == kTBChunkHeaderSize);
  if (size_bytes > kMaxSize) return nullptr;
  // Any size a config can ask for is usable: less than a page is a page.
  const size_t size = std::max(kPageSize, (size_bytes + kPageSize - 1) & ~(kPageSize - 1));
  std::shared_ptr<Mapping> mapping = Mapping::Map(size);
  if (mapping == nullptr) return nullptr;
  return std::unique_ptr<TraceBuffer>(new TraceBuffer(std::move(mapping), policy));
}

TraceBuffer::TraceBuffer(std::shared_ptr<Mapping> mapping, OverwritePolicy policy)
    : mapping_(std::move(mapping)),
      memory_(mapping_->memory),
      size_(mapping_->size),
      policy_(policy) {
  stats_.buffer_size = size_;
}

bool TraceBuffer::Populate() { return PopulateMemory(memory_, 0, size_); }

TraceBuffer::~TraceBuffer() {
  // A clone of this buffer may outlive it: it gets all its bytes first.
  while (!ContinueClone(size_)) {
  }
}

TraceBuffer::SequenceState* TraceBuffer::FindSequence(ProducerID producer_id, WriterID writer_id) {
  auto it = sequences_.find(SequenceKey(producer_id, writer_id));
  return it == sequences_.end() ? nullptr : &it->second;
}

TraceBuffer::SequenceState& TraceBuffer::GetOrCreateSequence(ProducerID producer_id,
                                                             WriterID writer_id,
                                                             ClientIdentity identity) {
  auto [it, inserted] = sequences_.try_emplace(SequenceKey(producer_id, writer_id));
  SequenceState& seq = it->second;
  if (inserted) {
    seq.producer_id = producer_id;
    seq.writer_id = writer_id;
  }
  seq.identity = identity;
  return seq;
}

ptrdiff_t TraceBuffer::FindChunkIndex(const SequenceState& seq, ChunkID chunk_id) const {
  const size_t n = seq.chunks.size();
  if (n == 0) return -1;
  const ChunkID front = seq.chunks.front_id();
  const uint32_t distance = chunk_id - front;
  // Fast path: the ChunkIDs in the queue are contiguous.
  if (distance < n && seq.chunks[distance].chunk_id == chunk_id) return distance;
  // A new chunk comes after the newest one: nothing to search. Every commit
  // asks, so this keeps a binary search over the whole queue off the
  // common path.
  if (distance > seq.chunks.back_id() - front) return -1;
  // Otherwise binary search: the queue is sorted by distance from the front.
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (seq.chunks[mid].chunk_id - front < distance) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < n && seq.chunks[lo].chunk_id == chunk_id ? static_cast<ptrdiff_t>(lo) : -1;
}

bool TraceBuffer::FitsInQueue(const SequenceState& seq, ChunkID chunk_id) {
  if (seq.chunks.empty()) return true;
  // Within half the circle after the oldest, or before the newest.
  constexpr uint32_t kHalf = uint32_t{1} << 31;
  return chunk_id - seq.chunks.front_id() < kHalf || seq.chunks.back_id() - chunk_id < kHalf;
}

void TraceBuffer::OnSequenceEmpty(SequenceState& seq) {
  RemoveFromEmptyList(seq);
  seq.empty_stamp = ++empty_stamp_counter_;
  empty_sequences_.emplace(seq.empty_stamp, SequenceKey(seq.producer_id, seq.writer_id));
  while (empty_sequences_.size() > kKeepLastEmptySeq) {
    auto oldest = empty_sequences_.begin();
    sequences_.erase(oldest->second);
    empty_sequences_.erase(oldest);
  }
}

void TraceBuffer::RemoveFromEmptyList(SequenceState& seq) {
  if (seq.empty_stamp == 0) return;
  empty_sequences_.erase(seq.empty_stamp);
  seq.empty_stamp = 0;
}

// --- Writing -----------------------------------------------------------------

void TraceBuffer::CopyChunkUntrusted(ProducerID producer_id_trusted,
                                     ClientIdentity client_identity_trusted, WriterID writer_id,
                                     ChunkID chunk_id, uint16_t num_fragments, uint8_t chunk_flags,
                                     bool chunk_complete, const uint8_t* src, size_t size) {
  if (read_only_) return;
  InvalidateReadIterator();
  SequenceState& seq = GetOrCreateSequence(producer_id_trusted, writer_id, client_identity_trusted);
  // Keep the sequence off the sweep list while we work on it: making room for
  // the chunk may empty other sequences and trigger a sweep.
  RemoveFromEmptyList(seq);

  if ((chunk_flags & ~kAllChunkFlags) != 0 || num_fragments > kMaxFragmentsPerChunk) {
    stats_.abi_violations++;
    chunk_flags &= kAllChunkFlags;
  }
  if (size > kMaxChunkPayloadSize || (size > 0 && src == nullptr)) {
    // Not a chunk any producer can have: refuse it whole.
    stats_.abi_violations++;
    stats_.data_loss_chunk_corrupted++;
    MarkRefused(seq, chunk_id, kDataLossChunkCorrupted);
  } else if (const ptrdiff_t index = FindChunkIndex(seq, chunk_id); index >= 0) {
    Recommit(seq, static_cast<size_t>(index), chunk_flags, chunk_complete, src, size,
             num_fragments);
  } else if (!FitsInQueue(seq, chunk_id)) {
    stats_.abi_violations++;  // Its place in the sequence is ambiguous.
  } else if (seq.has_last_consumed && !IsAfter(chunk_id, seq.last_consumed)) {
    // The sequence already moved past this ChunkID. The one legitimate case is
    // a scraped chunk that an overwrite evicted, committed again (finally, or
    // by a newer scrape) before anything later of its sequence was consumed:
    // admit it again, skipping the bytes consumed before the eviction.
    const bool readmit = seq.has_evicted_incomplete && seq.evicted_incomplete_id == chunk_id &&
                         seq.last_consumed == chunk_id;
    const Tokenized t = Tokenize(src, size, num_fragments, chunk_complete);
    if (readmit && t.payload_size >= seq.evicted_incomplete_consumed) {
      seq.has_evicted_incomplete = false;
      seq.last_consumed = chunk_id - 1;
      stats_.chunks_relocated++;
      StoreChunk(seq, chunk_id, chunk_flags, chunk_complete, src, size, num_fragments,
                 seq.evicted_incomplete_consumed);
    } else {
      stats_.abi_violations++;  // A stale or duplicate chunk.
    }
  } else {
    StoreChunk(seq, chunk_id, chunk_flags, chunk_complete, src, size, num_fragments, 0);
  }

  if (seq.chunks.empty() && seq.empty_stamp == 0) OnSequenceEmpty(seq);
}

void TraceBuffer::StoreChunk(SequenceState& seq, ChunkID chunk_id, uint8_t flags, bool complete,
                             const uint8_t* src, size_t size, uint16_t num_fragments,
                             uint16_t already_consumed) {
  // Copy, then walk the source's fragments, which the copy just brought into
  // this core's cache: not the copy's, still on their way to memory (the
  // walk is a chain of dependent loads). The unused tail is given back after.
  const uint32_t max_outer = AlignUp(kTBChunkHeaderSize + static_cast<uint32_t>(size));
  uint32_t next_record = 0;
  const int64_t offset = AllocateChunk(max_outer, &next_record);
  if (offset < 0) {
    stats_.chunks_discarded++;
    MarkRefused(seq, chunk_id, 0);
    return;
  }
  if (seq.has_last_consumed && !IsAfter(chunk_id, seq.last_consumed)) {
    // Making room overwrote later chunks of this very sequence (possible only
    // for an out-of-order or re-admitted chunk): storing it now would break
    // FIFO order, so it is lost with them.
    WritePadding(static_cast<uint32_t>(offset), max_outer);
    stats_.chunks_discarded++;
    AddLoss(seq, kDataLossOverwrite);
    return;
  }
  // AllocateChunk() preserved the whole allocation.
  TBChunk* c = reinterpret_cast<TBChunk*>(memory_ + offset);
  if (size > 0) std::memcpy(c->payload(), src, size);
  // The next write starts by deleting the record at next_record, whose
  // header was fetched before the copy. With many writers the state of its
  // sequence is out of cache: fetch it while the copy is walked.
  const TBChunk* next = nullptr;
  if (next_record < data_end_ && (FirstWordAt(next_record) & kPaddingBit) == 0) {
    next = ChunkAt(next_record);
    sequences_.prefetch(SequenceKey(next->producer_id, next->writer_id));
  }
  const Tokenized t = Tokenize(src, size, num_fragments, complete);
  uint8_t local_flags = 0;
  if (t.corrupted) {
    // The malformed fragment and everything after it are gone, including any
    // last fragment that continued or awaited patches.
    stats_.abi_violations++;
    flags &= ~(kLastPacketContinuesOnNextChunk | kChunkNeedsPatching);
    local_flags |= kCorrupted;
  }
  if (!complete) {
    // The unreadable last fragment is the only one that could continue or
    // need patches.
    flags &= ~(kLastPacketContinuesOnNextChunk | kChunkNeedsPatching);
    local_flags |= kIncomplete;
  }
  // A scraped chunk keeps its whole size, so its final commit fits in place.
  const uint32_t reserved = complete ? t.payload_size : static_cast<uint32_t>(size);
  const uint32_t outer = AlignUp(kTBChunkHeaderSize + reserved);
  if (outer < max_outer) {
    GiveBackTail(static_cast<uint32_t>(offset) + outer, static_cast<uint32_t>(offset) + max_outer);
  }
  c->size_and_padding = outer;
  c->chunk_id = chunk_id;
  c->producer_id = seq.producer_id;
  c->writer_id = seq.writer_id;
  c->payload_size = static_cast<uint16_t>(t.payload_size);
  c->payload_consumed = std::min<uint16_t>(already_consumed, c->payload_size);
  c->last_fragment_offset = static_cast<uint16_t>(t.last_fragment_offset);
  c->flags = flags | local_flags;
  c->history = 0;

  InsertChunkRef(seq, ChunkRef{chunk_id, static_cast<uint32_t>(offset)});
  live_chunks_++;
  stats_.chunks_written++;
  stats_.bytes_written += outer;

  // Then, with that state here, the front of its chunk queue and the entry
  // after it, which deleting the front (usually that chunk) reads.
  if (next != nullptr) {
    const SequenceState* next_seq = FindSequence(next->producer_id, next->writer_id);
    if (next_seq != nullptr && !next_seq->chunks.empty()) {
      __builtin_prefetch(&next_seq->chunks.front());
      if (next_seq->chunks.size() > 1) __builtin_prefetch(&next_seq->chunks[1]);
    }
  }
}

void TraceBuffer::GiveBackTail(uint32_t new_end, uint32_t old_end) {
  if (data_end_ > old_end) {
    // Older chunks follow: mark the gap so the tiling holds until the next
    // write reclaims it.
    const uint32_t word = (old_end - new_end) | kPaddingBit | kTransientBit;
    std::memcpy(WritableBytes(new_end, sizeof(word)), &word, sizeof(word));
  } else {
    data_end_ = new_end;
  }
  wr_ = new_end;
}

void TraceBuffer::InsertChunkRef(SequenceState& seq, ChunkRef ref) {
  RemoveFromEmptyList(seq);
  if (seq.chunks.empty() || IsAfter(ref.chunk_id, seq.chunks.back_id())) {
    seq.chunks.push_back(ref);
    return;
  }
  // Out of order (SMB scraping): insert in ChunkID order.
  stats_.chunks_committed_out_of_order++;
  size_t pos = seq.chunks.size();
  while (pos > 0 && IsAfter(seq.chunks[pos - 1].chunk_id, ref.chunk_id)) pos--;
  seq.chunks.insert(pos, ref);
}

void TraceBuffer::Recommit(SequenceState& seq, size_t index, uint8_t flags, bool complete,
                           const uint8_t* src, size_t size, uint16_t num_fragments) {
  const ChunkRef ref = seq.chunks[index];
  TBChunk* old = MutableChunkAt(ref.offset);
  const Tokenized t = Tokenize(src, size, num_fragments, complete);

  if ((old->flags & kIncomplete) == 0) {
    if (!complete) return;  // A late scrape of a chunk already committed.
    // A complete chunk committed twice: harmless if it is the same chunk (its
    // last fragment may have been patched since, so only sizes and what was
    // already read are compared); anything else is a producer bug.
    if (!t.corrupted && t.payload_size == old->payload_size &&
        std::memcmp(src, old->payload(), old->payload_consumed) == 0) {
      stats_.chunks_rewritten++;
    } else {
      stats_.abi_violations++;
    }
    return;
  }

  // The final commit (or a newer scrape) of a scraped chunk. Its readable
  // fragments must come back unchanged; it may add fragments after them.
  if (t.corrupted || t.payload_size < old->payload_size ||
      std::memcmp(src, old->payload(), old->payload_size) != 0) {
    stats_.abi_violations++;  // A shorter or garbled recommit.
    return;
  }
  const uint32_t reserved = complete ? t.payload_size : static_cast<uint32_t>(size);
  // In place, unless making room for the chunk would erase its old copy: the
  // ring has come round to it, so rewriting it there would leave it first in
  // line to be overwritten, and ahead in buffer order of data written after
  // it. Storing it anew at the write position keeps it, as Perfetto does.
  const bool fits = kTBChunkHeaderSize + reserved <= old->outer_size();
  const uint32_t new_outer = AlignUp(kTBChunkHeaderSize + static_cast<uint32_t>(size));
  if (fits && !NextAllocationErases(ref.offset, new_outer)) {
    // In place, keeping the read position.
    std::memcpy(old->payload() + old->payload_size, src + old->payload_size,
                reserved - old->payload_size);
    old->payload_size = static_cast<uint16_t>(t.payload_size);
    old->last_fragment_offset = static_cast<uint16_t>(t.last_fragment_offset);
    uint8_t new_flags = flags | (old->flags & kSeen);
    if (!complete) {
      new_flags &= ~(kLastPacketContinuesOnNextChunk | kChunkNeedsPatching);
      new_flags |= kIncomplete;
    }
    old->flags = new_flags;
    seq.stalled_in_pass = 0;
    stats_.chunks_rewritten++;
    return;
  }

  // Store it anew and retire the old copy, which is dead space from now on.
  const uint16_t consumed = old->payload_consumed;
  old->flags |= kErased;
  seq.chunks.erase(index);
  live_chunks_--;
  stats_.chunks_relocated++;
  seq.stalled_in_pass = 0;
  StoreChunk(seq, ref.chunk_id, flags, complete, src, size, num_fragments, consumed);
}

void TraceBuffer::MarkRefused(SequenceState& seq, ChunkID chunk_id, uint32_t reasons) {
  // Packets of chunks before it were written before the loss: only a chunk
  // after it may carry the flag (see CheckForGap).
  if (!seq.has_refused || IsAfter(seq.refused_id, chunk_id)) seq.refused_id = chunk_id;
  seq.has_refused = true;
  seq.refused_loss |= reasons;
}

void TraceBuffer::CheckForGap(SequenceState& seq, TBChunk* c) {
  if (c->flags & kSeen) return;
  c->flags |= kSeen;
  // Without a chunk consumed before, a first ChunkID above 0 is no evidence of
  // a loss (docs/design/trace-buffer.md, Losses): like Perfetto, only gaps after one count.
  if (seq.has_last_consumed && c->chunk_id != seq.last_consumed + 1) {
    stats_.data_loss_read_gap++;
    stats_.data_loss_missing_chunks += c->chunk_id - (seq.last_consumed + 1);
    AddLoss(seq, kDataLossReadGap);
  }
  if (seq.has_refused && IsAfter(c->chunk_id, seq.refused_id)) {
    AddLoss(seq, seq.refused_loss);
    seq.has_refused = false;
    seq.refused_loss = 0;
  }
  if (seq.has_evicted_incomplete && IsAfter(c->chunk_id, seq.evicted_incomplete_id)) {
    // The evicted scraped chunk was not committed again before the sequence
    // moved on: the fragment its writer was writing is lost after all.
    seq.has_evicted_incomplete = false;
    if (seq.evicted_incomplete_uncounted_bytes > 0) {
      stats_.chunks_overwritten++;
      stats_.bytes_overwritten += seq.evicted_incomplete_uncounted_bytes;
      stats_.data_loss_overwrite++;
      AddLoss(seq, kDataLossOverwrite);
    }
  }
}

void TraceBuffer::ReportCorruption(SequenceState& seq, TBChunk* c) {
  c->flags &= ~kCorrupted;
  stats_.data_loss_chunk_corrupted++;
  AddLoss(seq, kDataLossChunkCorrupted);
}

bool TraceBuffer::TryPatchChunkContents(ProducerID producer_id, WriterID writer_id,
                                        ChunkID chunk_id, const Patch* patches, size_t n,
                                        bool other_patches_pending) {
  SequenceState* seq = read_only_ ? nullptr : FindSequence(producer_id, writer_id);
  const ptrdiff_t index = seq ? FindChunkIndex(*seq, chunk_id) : -1;
  if (index < 0) {
    stats_.patches_failed += n;
    return false;
  }
  TBChunk* c = MutableChunkAt(seq->chunks[static_cast<size_t>(index)].offset);
  if ((c->flags & kChunkNeedsPatching) == 0 || (c->flags & kIncomplete) != 0) {
    stats_.patches_failed += n;
    return false;
  }
  // Patches may only touch the data of the last fragment: the one a writer
  // leaves open. Anything else is refused, and the fragment is dropped so the
  // sequence does not wait for it forever.
  uint32_t fragment_size = 0;
  const uint8_t* last = c->payload() + c->last_fragment_offset;
  const size_t header = ReadFragmentSize(last, c->payload() + c->payload_size, &fragment_size);
  const uint32_t data_begin = c->last_fragment_offset + static_cast<uint32_t>(header);
  bool valid = header > 0 && fragment_size != kPacketSizeDropPacket;
  for (size_t i = 0; valid && i < n; i++) {
    const size_t off = patches[i].offset_untrusted;
    valid = off >= data_begin && off >= c->payload_consumed && off <= c->payload_size &&
            c->payload_size - off >= 4;
  }
  if (!valid) {
    stats_.patches_failed += n;
    stats_.abi_violations++;
    c->payload_size = c->last_fragment_offset;
    c->flags &= ~(kLastPacketContinuesOnNextChunk | kChunkNeedsPatching);
    c->flags |= kCorrupted;
    seq->stalled_in_pass = 0;
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    std::memcpy(c->payload() + patches[i].offset_untrusted, patches[i].data.data(), 4);
  }
  stats_.patches_succeeded += n;
  if (!other_patches_pending) {
    c->flags &= ~kChunkNeedsPatching;
    seq->stalled_in_pass = 0;
  }
  return true;
}

}  // namespace ringside::buffer
