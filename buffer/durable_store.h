#ifndef RINGSIDE_BUFFER_DURABLE_STORE_H_
#define RINGSIDE_BUFFER_DURABLE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ringside::buffer {

// The durable side-buffer beside a ring TraceBuffer: descriptor packets
// (processes, threads, interned strings) that ring wrap must never take
// away, or a trace shows bare pids. Fuchsia's durable buffer keeps such
// records but stops tracing when it fills; this one compacts instead and
// never refuses a write.
//
// Entries are keyed by what they describe, so a renamed or re-exec'd
// process replaces its entry instead of adding one. An entity that ended
// (MarkEnded) keeps its entry while data in the ring may still refer to it.
// The owner calls Drained() after a flush + drain of the ring's producers
// that follows a read of every source's staging rings (BufferOwner::Flush)
// with the ring's total bytes written; an entry's end is pinned to the ring
// position of the second drain after MarkEnded (by then all data written
// before the end is in the ring, whatever sat in staging rings or open
// chunks),
// and the entry is dropped once more than a ring's worth has been written
// past that. A pid reused while its old entry is still kept
// gets an entry of its own (keys carry a generation).
//
// The capacity is heap: an entry counts what it takes in memory, the
// store's own structures included (EntryCost), so that a full store, and
// its copy, stay within the capacity each. When a write would exceed it:
// compaction first, then the ended entries in the order they ended, then
// (counted as loss) the least recently written live ones.
//
// Not thread-safe; the buffer's owner uses it.
class DurableStore {
 public:
  // kProcessLabels: what else describes a process (its pod), in a packet of
  // its own, under the process's id.
  enum class Kind : uint8_t { kProcess = 1, kThread = 2, kInterned = 3, kProcessLabels = 4 };
  // The id of a kInterned entry names the packet sequence whose samples
  // refer to it (interned ids are per sequence): a reader hands the entry
  // out on that sequence. `entry` tells the sequence's entries apart.
  static constexpr uint64_t InternedId(uint16_t producer, uint16_t writer, uint32_t entry) {
    return uint64_t{producer} << 48 | uint64_t{writer} << 32 | entry;
  }
  // The sequence {producer, writer} an entry is read on: {0, 0}, the
  // store's own, but for interned data the one its id names.
  static constexpr std::pair<uint16_t, uint16_t> SequenceOf(Kind kind, uint64_t id) {
    if (kind != Kind::kInterned) return {0, 0};
    return {static_cast<uint16_t>(id >> 48), static_cast<uint16_t>(id >> 32)};
  }
  struct Stats {
    uint64_t capacity = 0;
    uint64_t bytes = 0;      // Used now.
    uint64_t max_bytes = 0;  // High-water mark; never above capacity.
    uint64_t entries = 0;
    uint64_t writes = 0;
    uint64_t replaced = 0;       // Writes that replaced an entry of the same key.
    uint64_t compacted = 0;      // Ended entries dropped once the ring moved past them.
    uint64_t evicted_ended = 0;  // Ended entries dropped early for room.
    uint64_t evicted_live = 0;   // Live entries dropped for room: a loss.
    uint64_t rejected = 0;       // Single entries larger than the whole store.
  };

  // `ring_size`: bytes of the ring this store sits beside (how far the ring
  // must move past an ended entity before its entry can go).
  DurableStore(size_t capacity, size_t ring_size);

  // Writes the descriptor of {kind, id}, replacing the live entry of that
  // key; `packet` is a serialized TracePacket.
  void Put(Kind kind, uint64_t id, std::string_view packet);
  // The entity ended. Its entry stays until compacted.
  void MarkEnded(Kind kind, uint64_t id);
  // A late description of an entity that already ended (its records are
  // read per CPU, so one may come after its end): replaces the newest
  // entry of {kind, id}, which stays (or becomes) ended, its end where it
  // was; adds an ended entry when the key has none.
  void PutEnded(Kind kind, uint64_t id, std::string_view packet);
  // A flush and drain of the ring's producers finished; the ring has had
  // `ring_bytes_written` bytes written in total. Pins pending ends and drops
  // the ended entries the ring has moved past.
  void Drained(uint64_t ring_bytes_written);
  // Drains an end waits for before it is pinned to a ring position.
  static constexpr uint8_t kDrainsBeforePinning = 2;

  // Visits every entry, in the order they were last written. `changed_only`:
  // only those written since the last visit with `mark_read`.
  void ForEach(const std::function<void(Kind, uint64_t id, std::string_view packet)>& visit,
               bool changed_only = false, bool mark_read = false);
  bool Contains(Kind kind, uint64_t id) const;

  // A copy for another output (a snapshot): everything in it counts as
  // not yet read, so its first changed-only visit hands out all of it.
  std::unique_ptr<DurableStore> Clone() const;
  // Everything counts as not yet read: the next changed-only visit hands
  // out all of it (a new output file that must name every task again).
  void MarkAllUnread();
  const Stats& stats() const { return stats_; }

  // What an entry whose packet has `packet_bytes` counts against the
  // capacity: the heap it takes (glibc's malloc; the store's own structures
  // and the packet's copy), so that a full store holds its capacity in
  // memory, not more. The index of live entries counts on top, by its size.
  static size_t EntryCost(size_t packet_bytes);
  // The part of EntryCost that does not depend on the packet.
  static size_t EntryOverhead();

 private:
  // {kind, id, generation}: generations only differ for reused ids. The
  // newest generation of {kind, id} is its live entry unless it ended: a
  // new generation begins only when none is live.
  using Key = std::tuple<Kind, uint64_t, uint64_t>;
  struct Entry;
  // An entry's node in entries_: its key and the entry.
  using Node = std::pair<const Key, Entry>;
  struct Entry {
    std::string packet;
    uint64_t ended_at = 0;  // Ring bytes written once everything before the end was in.
    // Its neighbours in the list of entries by when they were last written
    // (null at either end).
    Node* older = nullptr;
    Node* newer = nullptr;
    bool ended = false;
    uint8_t drains_to_pin = 0;  // Drains left before ended_at is pinned.
    bool read = false;          // Handed out since last written.
  };
  // Entries are referred to by their place in entries_ (a map's iterators
  // stay valid until their own entry is erased).
  using EntryRef = std::map<Key, Entry>::iterator;
  using LiveKey = std::pair<Kind, uint64_t>;
  using LiveIndex = absl::flat_hash_map<LiveKey, EntryRef>;

  // Clone's: the indexes rebuilt to refer to the copy's entries.
  DurableStore(const DurableStore& other);
  DurableStore& operator=(const DurableStore&) = delete;

  static size_t CostOf(const Entry& e);
  size_t IndexBytes() const;
  // stats_.bytes (and its high-water mark) from what entries and index take.
  void Account();
  // The newest entry of {kind, id}, ended or not; end() when none.
  EntryRef Newest(Kind kind, uint64_t id);
  // Takes a live entry out of live_.
  void Unindex(EntryRef it);
  // Puts an entry at the newest end of the list by when written.
  void LinkNewest(Node* node);
  void Unlink(Node* node);
  void Remove(EntryRef it);
  // Writes `packet` over an entry's, as the most recently written.
  void Replace(EntryRef it, std::string_view packet);
  // Evicts until the bytes fit the capacity.
  void MakeRoom();
  bool EvictOne(bool ended);

  size_t capacity_;
  size_t ring_size_;
  uint64_t generation_ = 0;
  std::map<Key, Entry> entries_;
  size_t entry_bytes_ = 0;  // What the entries count (EntryCost); stats_.bytes adds the index.
  // The live (not ended) entry of each {kind, id}.
  LiveIndex live_;
  // Every entry by when it was last written, through their own links
  // (Entry::older, newer), so that neither of the two questions asked of
  // that order walks the whole store:
  // - Which live entry to evict: live ones are evicted only once no ended
  //   one is left, so the oldest entry is the one. (A scan of live_ for it
  //   cost a put 37 us in a store of 10,000 live entries, 0.7 ms in one of
  //   50,000: BM_DurableStore_PutFull.)
  // - What a read pass takes (ForEach, changed only): the entries written
  //   since the last pass, the newest ones. A pass marks all it visits
  //   read, and a write makes its entry the newest, so the unread entries
  //   are always the newest end of the list. (A walk of the whole map for
  //   them cost each streamed write 0.18 ms with 16,000 entries, 0.6 ms
  //   with 50,000: BM_DurableStore_ChangedPass.)
  Node* oldest_ = nullptr;
  Node* newest_ = nullptr;
  // The ended entries, in the order they ended. Their ends are pinned in
  // that order, so the entries a drain pins are the newest, and those it
  // compacts (as those evicted first) the oldest: a drain touches only
  // those, not every entry (the threads and processes of a whole machine).
  std::deque<EntryRef> ended_;
  Stats stats_;
};

// One read pass over a store: the entries written since the previous pass
// (marked read as they are taken), each with the packet sequence it is read
// on (DurableStore::SequenceOf). A TraceBuffer hands them out before its
// ring's packets.
class DurableReadPass {
 public:
  struct Entry {
    std::string packet;
    uint16_t producer = 0;
    uint16_t writer = 0;
  };
  // Takes what `store` holds that no pass took yet; null: none.
  void Begin(DurableStore* store);
  // The next entry, or null once all were handed out.
  const Entry* Next() { return next_ < entries_.size() ? &entries_[next_++] : nullptr; }

 private:
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_DURABLE_STORE_H_
