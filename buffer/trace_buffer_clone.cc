// TraceBuffer's copy-on-write clone: the block copy shared by the owner and
// a CloneCopier, BeginClone/ContinueClone, and the chunk index a clone
// rebuilds from its memory.

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "buffer/internal/trace_buffer_memory.h"
#include "buffer/trace_buffer.h"

namespace ringside::buffer {

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
  // From the write cursor on, wrapping: the writers preserve blocks there
  // first (the oldest data, overwritten next), and a block preserved into
  // memory not yet populated costs the writer its page faults.
  PopulateMemory(memory_, wr_, (used_size_ + kPageSize - 1) & ~(kPageSize - 1));
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
