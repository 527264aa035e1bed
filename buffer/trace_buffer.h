#ifndef RINGSIDE_BUFFER_TRACE_BUFFER_H_
#define RINGSIDE_BUFFER_TRACE_BUFFER_H_

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "buffer/chunk_abi.h"
#include "buffer/durable_store.h"
#include "buffer/internal/circular_queue.h"
#include "buffer/trace_packet.h"

namespace ringside::buffer {

// Who committed a chunk, as the agent verified it (never read from the chunk).
struct ClientIdentity {
  uid_t uid = static_cast<uid_t>(-1);
  pid_t pid = 0;
};

// The sequence a packet read from the buffer belongs to.
struct PacketSequenceProperties {
  ProducerID producer_id_trusted = 0;
  ClientIdentity client_identity_trusted;
  WriterID writer_id = 0;
  // The packet is a durable store's entry, not a ring packet.
  bool durable = false;
};

// Bits of the `previous_packet_on_sequence_dropped` value of
// ReadNextTracePacket(): the values of TracePacket.DataLossReason.
enum DataLoss : uint32_t {
  kDataLossPresent = 1,
  kDataLossReadGap = 2,
  kDataLossChunkCorrupted = 4,
  kDataLossOrphanContinuation = 8,
  kDataLossReassemblyGap = 16,
  kDataLossReassemblyBrokenChain = 32,
  kDataLossOverwrite = 64,
  kDataLossWriterAbort = 128,
  kDataLossSmbFull = 256,
};

// The central buffer of the agent: producers' chunks go in, whole TracePackets
// come out, every loss on the way is counted and flagged on the next packet of
// the sequence that suffered it. TraceBufferV2 semantics
// (shared/seeds/tracebuffer-v2-design.txt), with Perfetto's API names.
//
// Chunks are copied one after another into a flat ring of memory, each
// behind a 20-byte header; a chunk that does not fit before the end wraps to
// 0, and writing over older chunks deletes them first (a loss, counted and
// flagged on the next packet of their sequence that is read):
//
//       0                         wr_                 data_end_         size_
//       +-------+----+-----+------+----------+----+---+--------+----------+
//       | A3    | B2 | pad | A4   | B1 (old) | A1 | A2|B? ...  | abandoned|
//       +-------+----+-----+------+----------+----+---+--------+----------+
//       |<--- newer lap: [0, wr_) --->|<- older lap: [wr_, data_end_) ->|
//
// A sequence ({ProducerID, WriterID}) is read in ChunkID order, its
// fragmented packets put back together; nothing from a producer is trusted. Cloning is
// copy-on-write: BeginClone() under the owner's lock takes microseconds, a
// CloneCopier copies the bytes without it. docs/design/trace-buffer.md has
// the layout, the two-layer read walk, stalls, recommits, losses and the
// clone, with pictures. The code: trace_buffer.cc (writes),
// trace_buffer_room.cc (the room they take, the overwrite of old chunks),
// trace_buffer_read.cc (the sequence reader), trace_buffer_clone.cc (the
// clone), internal/trace_buffer_memory.h (what they share).
//
// Not thread-safe: one owner thread (or lock) does everything but a
// CloneCopier's copying; a clone is then owned by whoever holds it.
class TraceBuffer {
  struct CloneCopy;  // Private; named early for CloneCopier.

 public:
  enum class OverwritePolicy {
    kOverwrite,  // RING_BUFFER: the newest data overwrites the oldest.
    kDiscard,    // DISCARD: once the end is reached nothing more is accepted.
  };

  // A 4-byte patch of a chunk's payload. Offsets count from the first byte of
  // the chunk payload (the first fragment's size header).
  struct Patch {
    size_t offset_untrusted = 0;
    std::array<uint8_t, 4> data{};
  };

  // Counters with Perfetto's BufferStats names. Cumulative; bytes include the
  // 20-byte TBChunk headers.
  struct Stats {
    uint64_t buffer_size = 0;
    uint64_t bytes_written = 0;
    uint64_t bytes_overwritten = 0;  // Unread data lost to the ring.
    uint64_t bytes_read = 0;
    uint64_t padding_bytes_written = 0;
    uint64_t padding_bytes_cleared = 0;
    uint64_t chunks_written = 0;
    uint64_t chunks_rewritten = 0;  // Recommits applied in place.
    // Recommits stored anew at the write position: the old copy was in the
    // way of the ring, had no room for them, or was evicted (re-admissions).
    uint64_t chunks_relocated = 0;
    uint64_t chunks_overwritten = 0;
    uint64_t chunks_discarded = 0;
    uint64_t chunks_read = 0;
    uint64_t chunks_committed_out_of_order = 0;
    uint64_t write_wrap_count = 0;
    uint64_t patches_succeeded = 0;
    uint64_t patches_failed = 0;
    uint64_t readaheads_succeeded = 0;
    uint64_t readaheads_failed = 0;
    uint64_t abi_violations = 0;
    uint64_t trace_writer_packet_loss = 0;
    // Losses by cause (one loss may have several causes).
    uint64_t data_loss_read_gap = 0;
    uint64_t data_loss_chunk_corrupted = 0;
    uint64_t data_loss_orphan_continuation = 0;
    uint64_t data_loss_reassembly_gap = 0;
    uint64_t data_loss_reassembly_broken_chain = 0;
    uint64_t data_loss_overwrite = 0;
    uint64_t data_loss_missing_chunks = 0;
  };

  // Called with each valid packet of chunks about to be overwritten, in
  // sequence order, before they are gone (the ProtoVM hook).
  using OverwriteObserver =
      std::function<void(const PacketSequenceProperties&, const TracePacket&)>;

  // Empty sequence states kept alive so a returning writer's gaps are still
  // detected; older empty ones are swept.
  static constexpr size_t kKeepLastEmptySeq = 1024;
  static constexpr size_t kPageSize = 4096;
  static constexpr size_t kMaxSize = (size_t{1} << 32) - kPageSize;  // Offsets are 32-bit.

  // The buffer holds `size_bytes` rounded up to a multiple of kPageSize, 4
  // KiB (so anything below it, 0 included, gets 4 KiB, as in Perfetto), on
  // every kernel: its memory is mapped in the kernel's pages (16 or 64 KiB
  // on some arm64 kernels), the rest of the last one unused.
  // Returns nullptr if `size_bytes` is above kMaxSize or the memory cannot be
  // mapped.
  static std::unique_ptr<TraceBuffer> Create(size_t size_bytes,
                                             OverwritePolicy policy = OverwritePolicy::kOverwrite);

  // Faults in all of the buffer's memory, so that the writers' first pass
  // over a fresh buffer does not take a page fault every 4 KiB on their
  // path (about 11 us each on some VMs: 16K of them for 64 MiB). The one
  // method callable from any thread beside the owner's: it asks the kernel
  // for pages and reads or writes no byte. Its memory is what the buffer
  // holds once it has filled, so it commits early what a recording commits
  // anyway. MADV_POPULATE_WRITE (5.14), else mlock and munlock (root or
  // RLIMIT_MEMLOCK); false when neither could.
  bool Populate();

  ~TraceBuffer();
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  // Copies a chunk payload (`src`, `size`: what follows the 8-byte chunk
  // header) into the buffer. `chunk_complete` is false for a chunk scraped
  // while its writer may still be writing its last fragment. Committing a
  // ChunkID the sequence still holds is a recommit (docs/design/trace-buffer.md, Recommits).
  // `src` may hold anything, but must not change during the call.
  void CopyChunkUntrusted(ProducerID producer_id_trusted, ClientIdentity client_identity_trusted,
                          WriterID writer_id, ChunkID chunk_id, uint16_t num_fragments,
                          uint8_t chunk_flags, bool chunk_complete, const uint8_t* src,
                          size_t size);

  // Applies `n` patches to the last fragment of a chunk. When
  // `other_patches_pending` is false the chunk stops waiting for patches.
  // Returns false if the chunk is not (or no longer) in the buffer, is not
  // waiting for patches, or a patch lies outside the chunk's unread last
  // fragment (then the fragment is dropped and the loss flagged).
  //
  // Perfetto applies a patch to any chunk still held; we also require the
  // chunk's kChunkNeedsPatching, because no producer that follows the chunk
  // ABI sends a patch for a chunk without it: a writer sets the flag on the
  // chunk before committing it whenever it leaves a size field there to patch,
  // and when it patches such a chunk itself (still uncommitted, in its shared
  // memory) it clears the flag and sends no patch. Only a flagged chunk is
  // held back from readers, so only there can a patch be sure to land before
  // the bytes are read; on an unflagged chunk it would race the reader.
  bool TryPatchChunkContents(ProducerID producer_id, WriterID writer_id, ChunkID chunk_id,
                             const Patch* patches, size_t n, bool other_patches_pending);

  // Starts a read pass from the oldest data. Sequences stalled in the previous
  // pass are tried again.
  void BeginRead();

  // Reads the next packet into *packet. *previous_packet_on_sequence_dropped is
  // 0 when nothing was lost on the sequence before this packet, else a DataLoss
  // bitmask of the causes. Returns false when the pass has no more packets.
  bool ReadNextTracePacket(TracePacket* packet, PacketSequenceProperties* sequence_properties,
                           uint32_t* previous_packet_on_sequence_dropped);

  // What a clone reads.
  enum class CloneScope {
    // What a read of this buffer would return next (Perfetto's clone).
    kUnread,
    // Everything still in memory, read before or not, as a reader that never
    // read anything would find it: for a snapshot of a buffer that a
    // streaming drain reads. Chunks read whole keep their bytes until the
    // ring overwrites them; only those of a sequence whose state was swept
    // since (kKeepLastEmptySeq) are left out.
    kEverything,
  };

  // A new buffer with the same contents, state and stats that can only be read,
  // copied at once: BeginClone() then ContinueClone() to the end. Returns
  // nullptr if memory cannot be mapped or another clone is in progress.
  std::unique_ptr<TraceBuffer> CloneReadOnly(CloneScope scope = CloneScope::kUnread);

  // Starts a copy-on-write clone of the buffer as it is now (see the class
  // comment); it can be read once clone_complete() says so, which
  // ContinueClone() returning true (or this buffer's destruction) brings
  // about. The clone may be handed to another thread at once and destroyed
  // at any time. Returns nullptr if memory cannot be mapped or a clone is
  // already in progress (one at a time).
  std::unique_ptr<TraceBuffer> BeginClone(CloneScope scope = CloneScope::kUnread);
  // Copies up to `max_bytes` more of the clone in progress (at least one
  // block). Returns true once it is complete, or if none is in progress.
  bool ContinueClone(size_t max_bytes);
  // True while a clone of this buffer is in progress.
  bool clone_in_progress() const { return cow_ != nullptr; }

  // Copies the clone in progress on a thread of its own, WITHOUT the
  // owner's lock, while the owner goes on writing: the owner then waits
  // only when it is about to change the very block being copied (a 64 KiB
  // memcpy), never for the lock. ContinueClone() under the lock afterwards
  // (any max_bytes) ends the clone on the owner's side. The copier may
  // outlive the buffer and its clone.
  class CloneCopier {
   public:
    // Copies up to `max_bytes` more (at least one block). True once the
    // clone is complete, or abandoned (its clone destroyed).
    bool CopySome(size_t max_bytes);

   private:
    friend class TraceBuffer;
    explicit CloneCopier(std::shared_ptr<CloneCopy> cow) : cow_(std::move(cow)) {}
    std::shared_ptr<CloneCopy> cow_;
  };
  // The copier of the clone in progress, or nullptr. Owner only.
  std::unique_ptr<CloneCopier> clone_copier() const;
  // On a clone: true once all its bytes are copied. Until then it reads as
  // empty. Always true for a buffer that is not a clone.
  bool clone_complete() const;
  // Faults in the memory a clone will be copied into, so that the copy steps
  // under the owner's lock only copy. Call on the clone, from any thread,
  // while it is in progress (as Populate()).
  void PrefaultCloneMemory();
  static constexpr size_t kCloneBlockSize = 64 << 10;
  // Smaller blocks let tests of small buffers see a clone in progress.
  void SetCloneBlockSizeForTesting(size_t size) { clone_block_size_ = size; }
  // Where the buffer's bytes start (tests that look at its mapping).
  const uint8_t* memory_for_testing() const { return memory_; }

  // The durable side-buffer beside this ring (none by default). Each read
  // pass hands out its entries written since the previous pass before any
  // ring packet, on the sequence {kDurableProducerId, 0}, but interned data
  // on the sequence its id names (DurableStore::InternedId), with `durable`
  // set in their properties; CloneReadOnly() clones it too, and the clone's
  // first pass hands out all of it.
  void SetDurableStore(std::unique_ptr<DurableStore> store) { durable_ = std::move(store); }
  DurableStore* durable() { return durable_.get(); }
  const DurableStore* durable() const { return durable_.get(); }
  static constexpr ProducerID kDurableProducerId = 0;

  void SetOverwriteObserver(OverwriteObserver observer) { observer_ = std::move(observer); }

  const Stats& stats() const { return stats_; }
  size_t size() const { return size_; }
  // Bytes of the buffer touched so far (the high-water mark of writes).
  size_t used_size() const { return used_size_; }
  // True while the buffer holds chunks with unread data.
  bool has_data() const { return live_chunks_ > 0; }
  bool read_only() const { return read_only_; }
  OverwritePolicy overwrite_policy() const { return policy_; }
  // Number of sequence states alive (for the sweeping tests).
  size_t sequence_count_for_testing() const { return sequences_.size(); }

 private:
  struct TBChunk;
  struct Mapping;
  struct ChunkRef {
    ChunkID chunk_id = 0;
    uint32_t offset = 0;
  };
  // Everything about a sequence but its chunk index (which a clone rebuilds
  // from its memory instead of copying).
  struct SequenceInfo {
    ProducerID producer_id = 0;
    WriterID writer_id = 0;
    ClientIdentity identity;
    // The last ChunkID consumed (read or erased); valid if has_last_consumed.
    ChunkID last_consumed = 0;
    bool has_last_consumed = false;
    // A scraped chunk that was evicted before its final commit arrived: its
    // ChunkID and how many payload bytes had been consumed, so the final
    // commit can be admitted again without duplicates.
    bool has_evicted_incomplete = false;
    ChunkID evicted_incomplete_id = 0;
    uint16_t evicted_incomplete_consumed = 0;
    // Its outer size if its eviction has not been counted as a loss yet (0:
    // counted), to count once the sequence moves on without it.
    uint32_t evicted_incomplete_uncounted_bytes = 0;
    // The lowest ChunkID the buffer refused (DISCARD full, oversized) and the
    // DataLoss bits to flag on the first chunk after it that is read.
    bool has_refused = false;
    ChunkID refused_id = 0;
    uint32_t refused_loss = 0;
    // DataLoss bits to report on the next packet read from the sequence.
    uint32_t pending_loss = 0;
    // The read pass in which the sequence stalled (0: never).
    uint64_t stalled_in_pass = 0;
    // Key in empty_sequences_ while the sequence is empty (0: not listed).
    uint64_t empty_stamp = 0;
  };
  // The chunks of a sequence in the buffer, sorted by ChunkID (modulo 2^32
  // from the front; all within half the circle, see FitsInQueue), with the
  // ChunkIDs of the first and the last at hand: every commit compares its
  // ChunkID with them, and with many writers the queue's own memory is
  // seldom in cache when the state is.
  class ChunkQueue {
   public:
    size_t size() const { return queue_.size(); }
    bool empty() const { return queue_.empty(); }
    const ChunkRef& operator[](size_t i) const { return queue_[i]; }
    const ChunkRef& front() const { return queue_.front(); }
    const ChunkRef& back() const { return queue_.back(); }
    // REQUIRES: !empty().
    ChunkID front_id() const { return front_id_; }
    ChunkID back_id() const { return back_id_; }

    void push_back(ChunkRef ref) {
      if (queue_.empty()) front_id_ = ref.chunk_id;
      back_id_ = ref.chunk_id;
      queue_.push_back(ref);
    }
    void pop_front() {
      queue_.pop_front();
      if (!queue_.empty()) front_id_ = queue_.front().chunk_id;
    }
    void insert(size_t pos, ChunkRef ref) {
      queue_.insert(pos, ref);
      CacheIds();
    }
    void erase(size_t pos) {
      queue_.erase(pos);
      if (!queue_.empty()) CacheIds();
    }

   private:
    void CacheIds() {
      front_id_ = queue_.front().chunk_id;
      back_id_ = queue_.back().chunk_id;
    }
    internal::CircularQueue<ChunkRef> queue_;
    ChunkID front_id_ = 0;
    ChunkID back_id_ = 0;
  };
  struct SequenceState : SequenceInfo {
    ChunkQueue chunks;
  };
  enum class Mode { kRead, kErase };
  enum class Reassembly { kDone, kNeedMoreData, kLost };

  TraceBuffer(std::shared_ptr<Mapping> mapping, OverwritePolicy policy);

  static uint32_t SequenceKey(ProducerID p, WriterID w) { return uint32_t{p} << 16 | w; }
  // Every read of the memory goes through ChunkAt() or FirstWordAt(), every
  // write through MutableChunkAt() or WritableBytes(), which first preserve
  // the bytes for a clone in progress.
  const TBChunk* ChunkAt(uint32_t offset) const;
  uint32_t FirstWordAt(uint32_t offset) const;
  // The chunk (or padding record) at `offset`, whole, about to be changed.
  TBChunk* MutableChunkAt(uint32_t offset);
  // [offset, offset + size) about to be written with new contents.
  uint8_t* WritableBytes(uint32_t offset, uint32_t size);
  void PreserveForClone(uint32_t offset, uint32_t size) {
    if (cow_ != nullptr) [[unlikely]]
      PreserveSlow(offset, size);
  }
  void PreserveSlow(uint32_t offset, uint32_t size);
  // Ends the clone in progress if nobody holds the clone any more.
  bool DropAbandonedClone();
  // Copies block `block` into the clone if it is not there yet (waiting if
  // a CloneCopier is copying it).
  void CopyCloneBlock(size_t block);
  // On a complete clone read for the first time: the chunk index of every
  // sequence, from the chunks in its memory (with rewind_, the chunks read
  // before too, unread again).
  void RebuildChunkIndex();
  SequenceState* FindSequence(ProducerID producer_id, WriterID writer_id);
  SequenceState& GetOrCreateSequence(ProducerID producer_id, WriterID writer_id,
                                     ClientIdentity identity);
  // Index in seq.chunks of `chunk_id`, or -1. O(1) when the ids are contiguous.
  ptrdiff_t FindChunkIndex(const SequenceState& seq, ChunkID chunk_id) const;
  // Whether the sequence's chunks and `chunk_id` together lie within half the
  // ChunkID circle, the queue's invariant: only there does IsAfter() order
  // them all alike. Stays true as chunks leave the queue.
  static bool FitsInQueue(const SequenceState& seq, ChunkID chunk_id);

  // Writing.
  void Recommit(SequenceState& seq, size_t index, uint8_t flags, bool complete, const uint8_t* src,
                size_t size, uint16_t num_fragments);
  // True if reserving `outer_size` bytes now would erase the chunk at `offset`.
  bool NextAllocationErases(uint32_t offset, uint32_t outer_size) const;
  // Reserves `outer_size` bytes at the write cursor, deleting what is there.
  // Returns the offset, or -1 if the buffer refuses the chunk (DISCARD full).
  // *next_record: the first record after what was deleted, the first the
  // next allocation may delete (size() if none).
  int64_t AllocateChunk(uint32_t outer_size, uint32_t* next_record);
  // Deletes every chunk that starts in [begin, end); returns the end of the
  // last one (which may lie past `end`).
  uint32_t DeleteRange(uint32_t begin, uint32_t end);
  void WritePadding(uint32_t offset, uint32_t size);
  // Shrinks the newest allocation, [.., old_end), to end at new_end.
  void GiveBackTail(uint32_t new_end, uint32_t old_end);
  // Copies a chunk into newly allocated space and queues it on `seq`.
  void StoreChunk(SequenceState& seq, ChunkID chunk_id, uint8_t flags, bool complete,
                  const uint8_t* src, size_t size, uint16_t num_fragments,
                  uint16_t already_consumed);
  void InsertChunkRef(SequenceState& seq, ChunkRef ref);

  // Reading.
  bool ReadInSequence(SequenceState& seq, uint32_t target_offset, Mode mode, TracePacket* packet);
  Reassembly Reassemble(SequenceState& seq, Mode mode, TracePacket* packet);
  // Where the fragmented packet begun in seq's front chunk ends: the chunk
  // of its last fragment (null while there is none), the end of that
  // fragment, and the chunk's index in seq.chunks; or why the packet is
  // lost (0: not lost, wait for more).
  struct ReassemblyEnd {
    TBChunk* chunk = nullptr;
    uint32_t fragment_end = 0;
    size_t index = 0;
    uint32_t lost_reason = 0;
  };
  // Appends the packet's continuations to reassembly_pieces_ up to its end.
  ReassemblyEnd FindReassemblyEnd(SequenceState& seq, Mode mode);
  // Drops the packet begun in `begin` and counts its loss for `lost_reason`.
  void DropReassembly(SequenceState& seq, TBChunk* begin, uint32_t lost_reason, Mode mode);
  // Removes the front chunk of `seq`, `c` (fully consumed, or erased in
  // kErase).
  void PopFrontChunk(SequenceState& seq, TBChunk* c, Mode mode);
  void AddLoss(SequenceState& seq, uint32_t reasons);
  // Remembers a chunk the buffer refused, to flag the loss after it.
  void MarkRefused(SequenceState& seq, ChunkID chunk_id, uint32_t reasons);
  // The loss checks done once per chunk when it reaches the front: ChunkID
  // gaps, refused chunks before it, an evicted scraped chunk never recommitted.
  void CheckForGap(SequenceState& seq, TBChunk* c);
  void ReportCorruption(SequenceState& seq, TBChunk* c);
  void OnSequenceEmpty(SequenceState& seq);
  void RemoveFromEmptyList(SequenceState& seq);
  // Marks the fragment bytes [c.payload_consumed, new_consumed) consumed; in
  // erase mode they are lost to the reader.
  void Consume(SequenceState& seq, TBChunk* c, uint32_t new_consumed, Mode mode);
  void DeleteChunk(uint32_t offset);
  void InvalidateReadIterator() { read_iterator_valid_ = false; }
  bool AdvanceReadCursor();

  std::shared_ptr<Mapping> mapping_;  // Shared with a clone in progress of this buffer.
  uint8_t* memory_;
  size_t size_;
  OverwritePolicy policy_;
  bool read_only_ = false;
  // A clone: its chunk index is still to be rebuilt once its memory is whole.
  bool index_pending_ = false;
  // A clone of CloneScope::kEverything.
  bool rewind_ = false;
  // The clone of this buffer in progress, if any.
  std::shared_ptr<CloneCopy> cow_;
  size_t clone_block_size_ = kCloneBlockSize;

  uint32_t wr_ = 0;        // Write cursor.
  uint32_t data_end_ = 0;  // End of the older lap; chunks tile [wr_, data_end_).
  size_t used_size_ = 0;   // High-water mark.
  bool discard_full_ = false;
  uint64_t live_chunks_ = 0;

  // Read pass state.
  uint64_t read_pass_ = 0;
  bool read_iterator_valid_ = false;
  uint32_t rd_ = 0;  // Outer walk cursor.
  bool rd_in_older_lap_ = false;
  bool reading_target_ = false;           // An inner walk targets the chunk at rd_.
  SequenceState* reading_seq_ = nullptr;  // Its sequence, while reading_target_.

  // Held inline: every commit looks up its own sequence and, once the ring
  // wraps, that of each chunk it overwrites, and with many writers neither is
  // in cache; a node map would add a dependent miss to each. Only inserting
  // moves states (GetOrCreateSequence(), before any reference is taken);
  // erasing (the sweep) leaves the others where they are, so a reference
  // held across a write, or reading_seq_ across a read pass, stays valid.
  absl::flat_hash_map<uint32_t, SequenceState> sequences_;
  // Empty sequences by the time they became empty (oldest first).
  absl::btree_map<uint64_t, uint32_t> empty_sequences_;
  uint64_t empty_stamp_counter_ = 0;

  OverwriteObserver observer_;
  std::unique_ptr<DurableStore> durable_;
  // The durable entries of the current read pass.
  DurableReadPass durable_pass_;
  Stats stats_;

  // Scratch for reassembly (kept to avoid allocating per packet).
  std::vector<TracePacket::Slice> reassembly_pieces_;
  TracePacket observer_packet_;
};

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_TRACE_BUFFER_H_
