#include "buffer/trace_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ringside::buffer {
namespace {

// Local TBChunk flags, above the three ABI flags.
constexpr uint8_t kIncomplete = 1 << 3;   // Scraped: the last fragment is not readable.
constexpr uint8_t kCorrupted = 1 << 4;    // Fragments were dropped as malformed: report it.
constexpr uint8_t kErased = 1 << 5;       // Consumed or overwritten: dead space.
constexpr uint8_t kSeen = 1 << 6;         // The ChunkID gap check was done.
constexpr uint8_t kLostInErase = 1 << 7;  // Unread bytes were erased by an overwrite.

// TBChunk::history bits: what happened to a chunk that its flags no longer say.
constexpr uint8_t kReadOut = 1;  // kErased because a read consumed all of it.

// The low bits of a record's first word (sizes are multiples of 4).
constexpr uint32_t kPaddingBit = 1;
// Padding that only marks the unused tail of the newest chunk, given back at
// once to the next write: not counted in the padding stats.
constexpr uint32_t kTransientBit = 2;
constexpr uint32_t kSizeMask = ~uint32_t{3};
constexpr uint32_t kAlignment = 4;

uint32_t AlignUp(uint32_t n) { return (n + kAlignment - 1) & ~(kAlignment - 1); }

// True if ChunkID `a` comes after `b`, modulo 2^32.
bool IsAfter(ChunkID a, ChunkID b) { return static_cast<int32_t>(a - b) > 0; }

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

// The header of every chunk stored in the buffer, followed by its payload.
// A padding record is just the first word, with kPaddingBit set; it can be as
// small as 4 bytes, so only that word may be read before checking it.
struct TraceBuffer::TBChunk {
  uint32_t size_and_padding;  // Outer size (header + reserved payload), | kPaddingBit.
  ChunkID chunk_id;
  ProducerID producer_id;
  WriterID writer_id;
  uint16_t payload_size;          // Readable fragment bytes.
  uint16_t payload_consumed;      // Bytes read (or erased) so far; a fragment boundary.
  uint16_t last_fragment_offset;  // Start of the last readable fragment (for patches).
  uint8_t flags;                  // ABI flags | local flags.
  uint8_t history;                // kReadOut.

  uint32_t outer_size() const { return size_and_padding & kSizeMask; }
  uint8_t* payload() { return reinterpret_cast<uint8_t*>(this) + sizeof(TBChunk); }
  const uint8_t* payload() const {
    return reinterpret_cast<const uint8_t*>(this) + sizeof(TBChunk);
  }
};

namespace {
constexpr uint32_t kTBChunkHeaderSize = 20;
constexpr size_t kGuardSize = 4096;
}  // namespace

// The buffer's memory. A clone in progress shares its mapping with the
// buffer it is cloned from, which copies into it.
struct TraceBuffer::Mapping {
  uint8_t* memory = nullptr;
  size_t size = 0;
  // False while a clone's bytes are still being copied in. Stored with
  // release once the last byte is in; a reader on another thread loads it
  // with acquire before touching the memory.
  std::atomic<bool> complete{true};

  ~Mapping() {
    if (memory != nullptr) munmap(memory - kGuardSize, size + 2 * kGuardSize);
  }
  // Maps `size` bytes (a multiple of the page size) between guard pages, or
  // returns nullptr.
  static std::shared_ptr<Mapping> Map(size_t size) {
    // Inaccessible guard pages on both sides turn any access outside the
    // buffer into a fault instead of a silent read of other memory.
    void* base = mmap(nullptr, size + 2 * kGuardSize, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    uint8_t* memory = static_cast<uint8_t*>(base) + kGuardSize;
    if (mprotect(memory, size, PROT_READ | PROT_WRITE) != 0) {
      munmap(base, size + 2 * kGuardSize);
      return nullptr;
    }
    auto m = std::make_shared<Mapping>();
    m->memory = memory;
    m->size = size;
    return m;
  }
};

// The clone in progress: which blocks of [0, bytes) are in its memory yet.
// Shared by the buffer's owner (which copies a block before changing it)
// and a CloneCopier on another thread (which copies the rest without the
// owner's lock). Each block is claimed by one of them at a time:
//
//   kNotCopied ──CAS by whoever gets there first──► kCopying ──memcpy──► kCopied
//
// and the owner changes a block's bytes only once it is kCopied (waiting the
// few microseconds a copier's memcpy of it takes), so a block is never read
// by one thread while written by another.
struct TraceBuffer::CloneCopy {
  enum : uint8_t { kNotCopied, kCopying, kCopied };
  std::shared_ptr<Mapping> source;  // The buffer's memory, mapped while a copier holds this.
  std::shared_ptr<Mapping> target;
  size_t block_size = 0;
  size_t bytes = 0;  // The source's used_size_ at the clone: nothing above matters.
  size_t blocks = 0;
  std::unique_ptr<std::atomic<uint8_t>[]> state;
  std::atomic<size_t> left{0};  // Blocks not copied yet.
  std::atomic<size_t> next{0};  // Where the next step goes on, cyclically.

  bool complete() const { return left.load(std::memory_order_acquire) == 0; }
  // Nobody holds the clone any more: what is left to copy is for nobody.
  bool abandoned() const { return target.use_count() <= 1; }
  // `block` is in the clone when this returns: copied here, or by the
  // thread that had claimed it (waited for).
  void CopyBlock(size_t block) {
    uint8_t s = kNotCopied;
    if (state[block].compare_exchange_strong(s, kCopying, std::memory_order_acquire)) {
      const size_t begin = block * block_size;
      std::memcpy(target->memory + begin, source->memory + begin,
                  std::min(block_size, bytes - begin));
      state[block].store(kCopied, std::memory_order_release);
      if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        target->complete.store(true, std::memory_order_release);
      }
      return;
    }
    while (s != kCopied) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
      s = state[block].load(std::memory_order_acquire);
    }
  }
  // Copies blocks from `next` on until `max_bytes` (at least one block)
  // are copied or the clone is complete. True once it is complete.
  bool CopySome(size_t max_bytes) {
    for (size_t copied = 0; !complete() && (copied == 0 || copied < max_bytes);) {
      const size_t block = next.fetch_add(1, std::memory_order_relaxed) % blocks;
      if (state[block].load(std::memory_order_acquire) == kCopied) continue;
      CopyBlock(block);
      copied += block_size;
    }
    return complete();
  }
};

bool TraceBuffer::CloneCopier::CopySome(size_t max_bytes) {
  if (cow_->abandoned()) return true;
  return cow_->CopySome(max_bytes);
}

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

TraceBuffer::~TraceBuffer() {
  // A clone of this buffer may outlive it: it gets all its bytes first.
  while (!ContinueClone(size_)) {
  }
}

const TraceBuffer::TBChunk* TraceBuffer::ChunkAt(uint32_t offset) const {
  return reinterpret_cast<const TBChunk*>(memory_ + offset);
}

uint32_t TraceBuffer::FirstWordAt(uint32_t offset) const {
  uint32_t word;
  std::memcpy(&word, memory_ + offset, sizeof(word));
  return word;
}

TraceBuffer::TBChunk* TraceBuffer::MutableChunkAt(uint32_t offset) {
  PreserveForClone(offset, std::max(FirstWordAt(offset) & kSizeMask, kTBChunkHeaderSize));
  return reinterpret_cast<TBChunk*>(memory_ + offset);
}

uint8_t* TraceBuffer::WritableBytes(uint32_t offset, uint32_t size) {
  PreserveForClone(offset, size);
  return memory_ + offset;
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

void TraceBuffer::AddLoss(SequenceState& seq, uint32_t reasons) {
  seq.pending_loss |= reasons | kDataLossPresent;
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
  // Copy first, then validate the copy: the fragment walk is a chain of
  // dependent loads, cheap on the lines just written and slow on a source
  // that is cold in this core's cache. The unused tail is given back after.
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
  const Tokenized t = Tokenize(c->payload(), size, num_fragments, complete);
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
  // a loss (see the class comment): like Perfetto, only gaps after one count.
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

void TraceBuffer::WritePadding(uint32_t offset, uint32_t size) {
  const uint32_t word = size | kPaddingBit;
  std::memcpy(WritableBytes(offset, sizeof(word)), &word, sizeof(word));
  stats_.padding_bytes_written += size;
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

// --- Reading -----------------------------------------------------------------

void TraceBuffer::BeginRead() {
  if (index_pending_) {
    if (!clone_complete()) return;  // Reads as empty until it is.
    RebuildChunkIndex();
  }
  durable_pass_.clear();
  durable_next_ = 0;
  if (durable_ != nullptr) {
    durable_->ForEach(
        [this](DurableStore::Kind, uint64_t, std::string_view p) { durable_pass_.emplace_back(p); },
        /*changed_only=*/true, /*mark_read=*/true);
  }
  read_pass_++;
  read_iterator_valid_ = true;
  reading_target_ = false;
  if (data_end_ > wr_) {
    rd_ = wr_;
    rd_in_older_lap_ = true;
  } else {
    rd_ = 0;
    rd_in_older_lap_ = false;
  }
}

bool TraceBuffer::AdvanceReadCursor() {
  rd_ += FirstWordAt(rd_) & kSizeMask;
  if (rd_in_older_lap_ && rd_ >= data_end_) {
    rd_ = 0;
    rd_in_older_lap_ = false;
  }
  return rd_in_older_lap_ || rd_ < wr_;
}

bool TraceBuffer::ReadNextTracePacket(TracePacket* packet,
                                      PacketSequenceProperties* sequence_properties,
                                      uint32_t* previous_packet_on_sequence_dropped) {
  if (!read_iterator_valid_) BeginRead();
  packet->Clear();
  if (!read_iterator_valid_) return false;  // A clone not yet complete.
  if (durable_next_ < durable_pass_.size()) {
    // Descriptors first: the ring packets after them may name what they describe.
    const std::string& d = durable_pass_[durable_next_++];
    packet->AddSlice(reinterpret_cast<const uint8_t*>(d.data()), d.size());
    *sequence_properties = PacketSequenceProperties{};
    sequence_properties->producer_id_trusted = kDurableProducerId;
    *previous_packet_on_sequence_dropped = 0;
    return true;
  }
  if (!rd_in_older_lap_ && rd_ >= wr_) return false;
  for (;;) {
    if (!reading_target_) {
      const uint32_t word = FirstWordAt(rd_);
      SequenceState* seq = nullptr;
      if ((word & kPaddingBit) == 0 && (ChunkAt(rd_)->flags & kErased) == 0) {
        seq = FindSequence(ChunkAt(rd_)->producer_id, ChunkAt(rd_)->writer_id);
      }
      if (seq == nullptr || seq->stalled_in_pass == read_pass_) {
        if (!AdvanceReadCursor()) return false;
        continue;
      }
      reading_target_ = true;
      // Overlap the misses of the next chunk in buffer order with this one.
      const uint32_t next = rd_ + (word & kSizeMask);
      const uint32_t prefetch_end = static_cast<uint32_t>(std::min<size_t>(next + 4096, size_));
      for (uint32_t line = next; line < prefetch_end; line += 64) {
        __builtin_prefetch(memory_ + line);
      }
      // Stays valid for the pass: sweeping only removes sequences that were
      // already empty before this one, and writes end the pass.
      reading_seq_ = seq;
    }
    SequenceState* seq = reading_seq_;
    if (ReadInSequence(*seq, rd_, Mode::kRead, packet)) {
      *sequence_properties =
          PacketSequenceProperties{seq->producer_id, seq->identity, seq->writer_id};
      *previous_packet_on_sequence_dropped = seq->pending_loss;
      seq->pending_loss = 0;
      return true;
    }
    reading_target_ = false;
    if (!AdvanceReadCursor()) return false;
  }
}

void TraceBuffer::Consume(SequenceState& seq, TBChunk* c, uint32_t new_consumed, Mode mode) {
  if (mode == Mode::kErase && new_consumed > c->payload_consumed) {
    c->flags |= kLostInErase;
    AddLoss(seq, kDataLossOverwrite);
  }
  c->payload_consumed = static_cast<uint16_t>(new_consumed);
}

void TraceBuffer::PopFrontChunk(SequenceState& seq, TBChunk* c, Mode mode) {
  const ChunkID chunk_id = seq.chunks.front_id();
  if (mode == Mode::kErase) {
    const bool lost = (c->flags & kLostInErase) != 0;
    if (lost) {
      stats_.chunks_overwritten++;
      stats_.bytes_overwritten += c->outer_size();
      stats_.data_loss_overwrite++;
      AddLoss(seq, kDataLossOverwrite);
    }
    if (c->flags & kIncomplete) {
      // Its unreadable last fragment is lost only if the chunk is not
      // committed again before the sequence moves on (see CheckForGap).
      seq.has_evicted_incomplete = true;
      seq.evicted_incomplete_id = chunk_id;
      seq.evicted_incomplete_consumed = c->payload_consumed;
      seq.evicted_incomplete_uncounted_bytes = lost ? 0 : c->outer_size();
    }
  } else {
    stats_.chunks_read++;
    stats_.bytes_read += c->outer_size();
    c->history |= kReadOut;  // Its bytes stay until overwritten: a rewound clone reads them.
  }
  c->flags |= kErased;
  seq.chunks.pop_front();
  live_chunks_--;
  seq.last_consumed = chunk_id;
  seq.has_last_consumed = true;
  if (seq.chunks.empty()) OnSequenceEmpty(seq);
}

bool TraceBuffer::ReadInSequence(SequenceState& seq, uint32_t target_offset, Mode mode,
                                 TracePacket* packet) {
  for (;;) {
    if (seq.chunks.empty() || (ChunkAt(target_offset)->flags & kErased) != 0) return false;
    if (mode == Mode::kRead && seq.stalled_in_pass == read_pass_) return false;

    TBChunk* c = MutableChunkAt(seq.chunks.front().offset);
    if ((c->flags & kSeen) == 0 && mode == Mode::kRead) {
      // First visit: the fragment walk ahead is a chain of dependent loads,
      // so fetch every line of the chunk now to overlap the misses.
      for (uint32_t line = 0; line < c->payload_size; line += 64) {
        __builtin_prefetch(c->payload() + line);
      }
    }
    CheckForGap(seq, c);

    const uint32_t consumed = c->payload_consumed;
    if (consumed >= c->payload_size) {
      if (c->flags & kCorrupted) ReportCorruption(seq, c);
      if ((c->flags & kIncomplete) && mode == Mode::kRead) {
        seq.stalled_in_pass = read_pass_;  // The final commit may add more.
        return false;
      }
      PopFrontChunk(seq, c, mode);
      continue;
    }

    uint32_t fragment_size = 0;
    const uint8_t* payload = c->payload();
    const size_t header =
        ReadFragmentSize(payload + consumed, payload + c->payload_size, &fragment_size);
    const bool drop = fragment_size == kPacketSizeDropPacket;
    const uint32_t data_offset = consumed + static_cast<uint32_t>(header);
    const uint32_t data_size = drop ? 0 : fragment_size;
    if (header == 0 || data_offset + uint64_t{data_size} > c->payload_size) {
      // Only a patch could have broken a fragment validated at commit time.
      stats_.abi_violations++;
      c->flags |= kCorrupted;
      Consume(seq, c, c->payload_size, mode);
      continue;
    }
    const uint32_t fragment_end = data_offset + data_size;
    const bool is_first = consumed == 0;
    const bool is_last = fragment_end == c->payload_size && (c->flags & kIncomplete) == 0;

    if (is_last && (c->flags & kChunkNeedsPatching) && mode == Mode::kRead) {
      seq.stalled_in_pass = read_pass_;
      return false;
    }
    if (drop) {
      Consume(seq, c, fragment_end, mode);
      stats_.trace_writer_packet_loss++;
      AddLoss(seq, kDataLossWriterAbort);
      continue;
    }
    if (is_first && (c->flags & kFirstPacketContinuesFromPrevChunk)) {
      // A continuation whose beginning is gone.
      Consume(seq, c, fragment_end, mode);
      stats_.data_loss_orphan_continuation++;
      AddLoss(seq, kDataLossOrphanContinuation);
      continue;
    }
    if (!(is_last && (c->flags & kLastPacketContinuesOnNextChunk))) {
      Consume(seq, c, fragment_end, mode);
      if (data_size == 0) continue;  // An empty packet carries nothing.
      packet->Clear();
      packet->AddSlice(payload + data_offset, data_size);
      return true;
    }
    switch (Reassemble(seq, mode, packet)) {
      case Reassembly::kDone:
        return true;
      case Reassembly::kNeedMoreData:
        seq.stalled_in_pass = read_pass_;
        return false;
      case Reassembly::kLost:
        continue;
    }
  }
}

TraceBuffer::Reassembly TraceBuffer::Reassemble(SequenceState& seq, Mode mode,
                                                TracePacket* packet) {
  TBChunk* begin = MutableChunkAt(seq.chunks.front().offset);
  uint32_t size = 0;
  const size_t header = ReadFragmentSize(begin->payload() + begin->payload_consumed,
                                         begin->payload() + begin->payload_size, &size);
  reassembly_pieces_.clear();
  reassembly_pieces_.push_back(
      TracePacket::Slice{begin->payload() + begin->payload_consumed + header, size});

  uint32_t lost_reason = 0;
  ChunkID prev_id = seq.chunks.front().chunk_id;
  size_t i = 1;
  TBChunk* end_chunk = nullptr;
  uint32_t end_fragment_end = 0;
  for (;; i++) {
    if (i >= seq.chunks.size()) {
      // The rest has not been committed yet: wait, unless the chunk is going.
      lost_reason = mode == Mode::kRead ? 0u : uint32_t{kDataLossOverwrite};
      break;
    }
    const ChunkRef ref = seq.chunks[i];
    TBChunk* next = MutableChunkAt(ref.offset);
    if (ref.chunk_id != prev_id + 1) {
      lost_reason = kDataLossReassemblyGap;
      break;
    }
    if (next->payload_size == 0) {
      if (next->flags & kIncomplete) {
        // Its final commit may bring the fragment: wait, unless erasing.
        lost_reason = mode == Mode::kRead ? 0u : uint32_t{kDataLossOverwrite};
        break;
      }
      if (next->flags & kCorrupted) {
        // The continuation it carried was malformed and dropped.
        lost_reason = kDataLossReassemblyBrokenChain;
        break;
      }
      // A chunk with no fragments at all (an idle writer flushed it) carries
      // nothing of this packet nor breaks it: the chain goes on after it.
      prev_id = ref.chunk_id;
      continue;
    }
    if ((next->flags & kFirstPacketContinuesFromPrevChunk) == 0 || next->payload_consumed != 0) {
      lost_reason = kDataLossReassemblyBrokenChain;
      break;
    }
    uint32_t piece_size = 0;
    const size_t piece_header =
        ReadFragmentSize(next->payload(), next->payload() + next->payload_size, &piece_size);
    const bool drop = piece_size == kPacketSizeDropPacket;
    const uint32_t piece_data_size = drop ? 0 : piece_size;
    if (piece_header == 0 || piece_header + uint64_t{piece_data_size} > next->payload_size) {
      lost_reason = kDataLossChunkCorrupted;
      break;
    }
    const uint32_t piece_end = static_cast<uint32_t>(piece_header) + piece_data_size;
    const bool piece_is_last = piece_end == next->payload_size && (next->flags & kIncomplete) == 0;
    if (piece_is_last && (next->flags & kChunkNeedsPatching) && mode == Mode::kRead) break;
    if (drop) {
      // The writer abandoned this packet; the marker is consumed with it.
      Consume(seq, next, piece_end, mode);
      stats_.trace_writer_packet_loss++;
      lost_reason = kDataLossWriterAbort;
      break;
    }
    reassembly_pieces_.push_back(
        TracePacket::Slice{next->payload() + piece_header, piece_data_size});
    if (piece_is_last && (next->flags & kLastPacketContinuesOnNextChunk)) {
      prev_id = ref.chunk_id;
      continue;
    }
    end_chunk = next;
    end_fragment_end = piece_end;
    break;
  }

  if (end_chunk == nullptr && lost_reason == 0) {
    stats_.readaheads_failed++;
    return Reassembly::kNeedMoreData;
  }
  if (end_chunk == nullptr) {
    // Drop the beginning; whatever follows reads on (orphans are flagged).
    Consume(seq, begin, begin->payload_size, mode);
    switch (lost_reason) {
      case kDataLossReassemblyGap:
        stats_.data_loss_reassembly_gap++;
        break;
      case kDataLossReassemblyBrokenChain:
        stats_.data_loss_reassembly_broken_chain++;
        break;
      case kDataLossChunkCorrupted:
        stats_.data_loss_chunk_corrupted++;
        break;
      default:
        break;
    }
    AddLoss(seq, lost_reason);
    return Reassembly::kLost;
  }

  packet->AssignOwned(reassembly_pieces_);
  stats_.readaheads_succeeded++;
  // Consume the beginning and every middle chunk whole, and the first
  // fragment of the end chunk, which stays for its other packets.
  for (size_t j = 0; j < i; j++) {
    TBChunk* c = MutableChunkAt(seq.chunks.front().offset);
    Consume(seq, c, c->payload_size, mode);
    PopFrontChunk(seq, c, mode);
  }
  Consume(seq, end_chunk, end_fragment_end, mode);
  return Reassembly::kDone;
}

// --- Cloning -----------------------------------------------------------------

std::unique_ptr<TraceBuffer> TraceBuffer::CloneReadOnly(CloneScope scope) {
  std::unique_ptr<TraceBuffer> clone = BeginClone(scope);
  if (clone != nullptr) {
    while (!ContinueClone(size_)) {
    }
  }
  return clone;
}

std::unique_ptr<TraceBuffer> TraceBuffer::BeginClone(CloneScope scope) {
  if (cow_ != nullptr) return nullptr;
  std::shared_ptr<Mapping> target = Mapping::Map(size_);
  if (target == nullptr) return nullptr;
  std::unique_ptr<TraceBuffer> clone(new TraceBuffer(target, policy_));
  clone->read_only_ = true;
  clone->index_pending_ = true;
  clone->rewind_ = scope == CloneScope::kEverything;
  clone->wr_ = wr_;
  clone->data_end_ = data_end_;
  clone->used_size_ = used_size_;
  clone->discard_full_ = discard_full_;
  clone->live_chunks_ = live_chunks_;
  clone->read_pass_ = read_pass_;
  clone->sequences_.reserve(sequences_.size());
  for (const auto& [key, seq] : sequences_) {
    static_cast<SequenceInfo&>(clone->sequences_[key]) = seq;
  }
  clone->empty_sequences_ = empty_sequences_;
  clone->empty_stamp_counter_ = empty_stamp_counter_;
  clone->stats_ = stats_;
  if (durable_ != nullptr) clone->durable_ = durable_->Clone();

  const size_t blocks = (used_size_ + clone_block_size_ - 1) / clone_block_size_;
  if (blocks == 0) return clone;  // Nothing was ever written: complete as it is.
  target->complete.store(false, std::memory_order_relaxed);
  cow_ = std::make_shared<CloneCopy>();
  cow_->source = mapping_;
  cow_->target = std::move(target);
  cow_->block_size = clone_block_size_;
  cow_->bytes = used_size_;
  cow_->blocks = blocks;
  cow_->state = std::make_unique<std::atomic<uint8_t>[]>(blocks);
  for (size_t b = 0; b < blocks; b++) cow_->state[b].store(CloneCopy::kNotCopied);
  cow_->left.store(blocks);
  // The oldest data first: it is what the writers overwrite next.
  cow_->next = std::min<size_t>(wr_ / clone_block_size_, blocks - 1);
  return clone;
}

bool TraceBuffer::DropAbandonedClone() {
  if (!cow_->abandoned() && !cow_->complete()) return false;
  // Complete, or the clone was destroyed (nobody will read what is left).
  cow_.reset();
  return true;
}

void TraceBuffer::CopyCloneBlock(size_t block) {
  if (DropAbandonedClone()) return;
  cow_->CopyBlock(block);
  if (cow_->complete()) cow_.reset();
}

bool TraceBuffer::ContinueClone(size_t max_bytes) {
  if (cow_ == nullptr || DropAbandonedClone()) return true;
  cow_->CopySome(max_bytes);
  return DropAbandonedClone();
}

std::unique_ptr<TraceBuffer::CloneCopier> TraceBuffer::clone_copier() const {
  if (cow_ == nullptr) return nullptr;
  return std::unique_ptr<CloneCopier>(new CloneCopier(cow_));
}

void TraceBuffer::PreserveSlow(uint32_t offset, uint32_t size) {
  if (DropAbandonedClone() || size == 0 || offset >= cow_->bytes) return;
  const size_t last = std::min<size_t>(uint64_t{offset} + size, cow_->bytes) - 1;
  const size_t block_size = cow_->block_size;
  for (size_t b = offset / block_size; b <= last / block_size && cow_ != nullptr; b++) {
    CopyCloneBlock(b);
  }
}

bool TraceBuffer::clone_complete() const {
  return mapping_->complete.load(std::memory_order_acquire);
}

void TraceBuffer::PrefaultCloneMemory() {
#ifdef MADV_POPULATE_WRITE
  // In slices: the kernel holds the process's memory map lock while it
  // populates, and a page fault of another thread waits behind a long hold.
  // From the write cursor on, wrapping: the writers preserve blocks there
  // first (the oldest data, overwritten next), and a block preserved into
  // memory not yet populated costs the writer its page faults.
  constexpr size_t kSlice = 4 << 20;
  const size_t end = (used_size_ + kPageSize - 1) & ~(kPageSize - 1);
  const size_t start = std::min(wr_ / kSlice * kSlice, end);
  for (size_t done = 0, offset = start; done < end;) {
    if (offset >= end) offset = 0;
    const size_t n = std::min(kSlice, end - offset);
    if (madvise(memory_ + offset, n, MADV_POPULATE_WRITE) != 0) break;
    offset += n;
    done += n;
  }
#endif
}

void TraceBuffer::RebuildChunkIndex() {
  index_pending_ = false;
  if (rewind_) {
    // Read from the start, as a reader that never read anything: no ChunkID
    // consumed before, no stall.
    for (auto& [key, seq] : sequences_) {
      seq.has_last_consumed = false;
      seq.stalled_in_pass = 0;
    }
  }
  // Buffer order, oldest first: the order the chunks of a sequence were
  // stored in, so nearly all go to the back of their queue.
  auto visit = [this](uint32_t begin, uint32_t end) {
    for (uint32_t offset = begin; offset < end;) {
      const uint32_t word = FirstWordAt(offset);
      if ((word & kPaddingBit) == 0) {
        TBChunk* c = MutableChunkAt(offset);
        bool live = (c->flags & kErased) == 0;
        if (rewind_) {
          // A chunk read whole is still intact until the ring overwrites it
          // (unlike one erased by an overwrite or retired by a relocation,
          // whose bytes are gone or live on elsewhere).
          if (!live && (c->history & kReadOut) != 0) {
            c->flags &= ~kErased;
            live_chunks_++;
            live = true;
          }
          c->history = 0;
          c->flags &= ~kSeen;
          c->payload_consumed = 0;
        }
        if (live) {
          if (SequenceState* seq = FindSequence(c->producer_id, c->writer_id)) {
            const ChunkRef ref{c->chunk_id, offset};
            size_t pos = seq->chunks.size();
            while (pos > 0 && IsAfter(seq->chunks[pos - 1].chunk_id, ref.chunk_id)) pos--;
            seq->chunks.insert(pos, ref);
            if (seq->empty_stamp != 0) RemoveFromEmptyList(*seq);
          } else if (rewind_ && (c->flags & kErased) == 0) {
            // Read out on a sequence swept since: nobody to read it as.
            c->flags |= kErased;
            live_chunks_--;
          }
        }
      }
      if ((word & kSizeMask) == 0) break;  // Never in a buffer we wrote; no endless loop.
      offset += word & kSizeMask;
    }
  };
  if (data_end_ > wr_) visit(wr_, data_end_);
  visit(0, wr_);
}

}  // namespace ringside::buffer
