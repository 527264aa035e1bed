#include "buffer/durable_store.h"

#include <algorithm>

namespace ringside::buffer {

namespace {

// The heap glibc's malloc takes for `n` bytes: a chunk of the request and
// its 8-byte size field, in steps of 16, 32 at least.
constexpr size_t MallocChunk(size_t n) { return std::max<size_t>(32, (n + 8 + 15) & ~size_t{15}); }

// The heap a string of `capacity` bytes holds past its inline buffer.
size_t StringHeap(size_t capacity) {
  static const size_t kInline = std::string().capacity();
  return capacity > kInline ? MallocChunk(capacity + 1) : 0;
}

}  // namespace

size_t DurableStore::EntryOverhead() {
  // The map's node (a red-black node's colour and three links, then the key
  // and the entry, its links by when written included), and its place in
  // ended_ (a deque's 512-byte blocks: 64 iterators each), counted for every
  // entry, as any may end. (The live index is counted by its own size:
  // IndexBytes.)
  return MallocChunk(4 * sizeof(void*) + sizeof(Node)) + sizeof(EntryRef);
}

size_t DurableStore::EntryCost(size_t packet_bytes) {
  return EntryOverhead() + StringHeap(packet_bytes);
}

size_t DurableStore::CostOf(const Entry& e) {
  return EntryOverhead() + StringHeap(e.packet.capacity());
}

DurableStore::DurableStore(size_t capacity, size_t ring_size)
    : capacity_(capacity), ring_size_(ring_size) {
  stats_.capacity = capacity;
}

DurableStore::DurableStore(const DurableStore& other)
    : capacity_(other.capacity_),
      ring_size_(other.ring_size_),
      generation_(other.generation_),
      entries_(other.entries_),
      entry_bytes_(other.entry_bytes_),
      stats_(other.stats_) {
  // The indexes and the list refer to entries by iterator and node: this
  // store's own, found from the other's by walking both maps (copies, in
  // the same order) side by side, not by a search of the map for each.
  live_.reserve(other.live_.size());
  absl::flat_hash_map<const Node*, EntryRef> mine;
  mine.reserve(entries_.size());
  auto theirs = other.entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it, ++theirs) {
    mine.emplace(&*theirs, it);
    if (!it->second.ended) {
      live_.emplace(LiveKey{std::get<0>(it->first), std::get<1>(it->first)}, it);
    }
  }
  for (const Node* n = other.oldest_; n != nullptr; n = n->second.newer) LinkNewest(&*mine.at(n));
  for (const EntryRef& e : other.ended_) ended_.push_back(mine.at(&*e));
  Account();
}

size_t DurableStore::IndexBytes() const {
  return live_.capacity() == 0
             ? 0
             : MallocChunk(live_.capacity() * (sizeof(LiveIndex::value_type) + 1) + 16);
}

void DurableStore::Account() {
  stats_.bytes = entry_bytes_ + IndexBytes();
  stats_.max_bytes = std::max(stats_.max_bytes, stats_.bytes);
}

void DurableStore::LinkNewest(Node* node) {
  node->second.older = newest_;
  node->second.newer = nullptr;
  if (newest_ != nullptr) {
    newest_->second.newer = node;
  } else {
    oldest_ = node;
  }
  newest_ = node;
}

void DurableStore::Unlink(Node* node) {
  Entry& e = node->second;
  (e.older != nullptr ? e.older->second.newer : oldest_) = e.newer;
  (e.newer != nullptr ? e.newer->second.older : newest_) = e.older;
  e.older = e.newer = nullptr;
}

void DurableStore::Unindex(EntryRef it) {
  live_.erase(LiveKey{std::get<0>(it->first), std::get<1>(it->first)});
  // A table left empty gives its memory back (it never shrinks otherwise).
  if (live_.empty()) live_ = LiveIndex();
}

void DurableStore::Remove(EntryRef it) {
  entry_bytes_ -= CostOf(it->second);
  stats_.entries--;
  if (!it->second.ended) {
    Unindex(it);
  } else if (!ended_.empty() && ended_.front() == it) {
    ended_.pop_front();  // Always so: ended entries go in the order they ended.
  } else if (auto e = std::find(ended_.begin(), ended_.end(), it); e != ended_.end()) {
    ended_.erase(e);
  }
  Unlink(&*it);
  entries_.erase(it);
}

// Drops the ended entry that ended first, or the live entry written least
// recently. An ended entity's records lie in the ring before its end: the
// first to end has the oldest, the first the ring overwrites. (By when it
// was written, a process that ran all along and just ended went first,
// while the ring was full of its records: they came out nameless.)
bool DurableStore::EvictOne(bool ended) {
  if (ended) {
    if (ended_.empty()) return false;
    Remove(ended_.front());
    stats_.evicted_ended++;
    return true;
  }
  // Called once no ended entry is left: the oldest written is live.
  if (oldest_ == nullptr) return false;
  Remove(entries_.find(oldest_->first));
  stats_.evicted_live++;
  return true;
}

void DurableStore::Replace(EntryRef it, std::string_view packet) {
  entry_bytes_ -= CostOf(it->second);
  std::string& p = it->second.packet;
  if (packet.size() <= p.capacity()) {
    p.assign(packet.data(), packet.size());
  } else {
    p = std::string(packet);  // Its own size: an assign could double the old one's.
  }
  it->second.read = false;
  Unlink(&*it);
  LinkNewest(&*it);
  entry_bytes_ += CostOf(it->second);
  stats_.replaced++;
}

void DurableStore::MakeRoom() {
  // Ended entries first, the first ended first; then live ones, the least
  // recently written first, counted. The entry just written is the newest,
  // so it goes last.
  while (entry_bytes_ + IndexBytes() > capacity_) {
    if (!EvictOne(/*ended=*/true) && !EvictOne(/*ended=*/false)) break;
  }
  Account();
}

DurableStore::EntryRef DurableStore::Newest(Kind kind, uint64_t id) {
  auto it = entries_.upper_bound({kind, id, UINT64_MAX});
  if (it == entries_.begin()) return entries_.end();
  --it;
  if (std::get<0>(it->first) != kind || std::get<1>(it->first) != id) return entries_.end();
  return it;
}

void DurableStore::Put(Kind kind, uint64_t id, std::string_view packet) {
  stats_.writes++;
  if (EntryCost(packet.size()) > capacity_) {
    stats_.rejected++;
    return;
  }
  auto [live, added] = live_.try_emplace(LiveKey{kind, id}, entries_.end());
  if (!added) {
    Replace(live->second, packet);
  } else {
    Entry e;
    e.packet = std::string(packet);
    // The newest generation of all: the last of {kind, id}'s.
    live->second = entries_.emplace(Key{kind, id, ++generation_}, std::move(e)).first;
    LinkNewest(&*live->second);
    entry_bytes_ += CostOf(live->second->second);
    stats_.entries++;
  }
  MakeRoom();
}

void DurableStore::PutEnded(Kind kind, uint64_t id, std::string_view packet) {
  // Not live: the newest entry of {kind, id}, if any, is ended.
  const auto newest = live_.contains(LiveKey{kind, id}) ? entries_.end() : Newest(kind, id);
  if (newest == entries_.end()) {
    Put(kind, id, packet);
    MarkEnded(kind, id);
    return;
  }
  stats_.writes++;
  if (EntryCost(packet.size()) > capacity_) {
    stats_.rejected++;
    return;
  }
  Replace(newest, packet);
  MakeRoom();
}

void DurableStore::MarkEnded(Kind kind, uint64_t id) {
  auto live = live_.find(LiveKey{kind, id});
  if (live == live_.end()) return;
  const EntryRef it = live->second;
  it->second.ended = true;
  it->second.drains_to_pin = kDrainsBeforePinning;
  ended_.push_back(it);
  Unindex(it);
  Account();
}

void DurableStore::Drained(uint64_t ring_bytes_written) {
  // Those still waiting to be pinned ended last: from the newest back.
  for (auto it = ended_.rbegin(); it != ended_.rend(); ++it) {
    Entry& e = (*it)->second;
    if (e.drains_to_pin == 0) break;
    if (--e.drains_to_pin == 0) e.ended_at = ring_bytes_written;
  }
  // Everything written before an end has been overwritten once a ring's
  // worth (and an eighth, for what the ring's reader holds back) has been
  // written past it: the oldest ends first.
  while (!ended_.empty()) {
    const Entry& e = ended_.front()->second;
    if (e.drains_to_pin != 0 || ring_bytes_written - e.ended_at <= ring_size_ + ring_size_ / 8) {
      break;
    }
    Remove(ended_.front());
    stats_.compacted++;
  }
  Account();
}

void DurableStore::ForEach(
    const std::function<void(Kind, uint64_t id, std::string_view packet)>& visit, bool changed_only,
    bool mark_read) {
  Node* first = oldest_;
  if (changed_only) {
    // The unread ones are the newest (oldest_'s comment).
    first = nullptr;
    for (Node* n = newest_; n != nullptr && !n->second.read; n = n->second.older) first = n;
  }
  for (Node* n = first; n != nullptr; n = n->second.newer) {
    visit(std::get<0>(n->first), std::get<1>(n->first), n->second.packet);
    if (mark_read) n->second.read = true;
  }
}

std::unique_ptr<DurableStore> DurableStore::Clone() const {
  std::unique_ptr<DurableStore> clone(new DurableStore(*this));
  clone->MarkAllUnread();
  return clone;
}

void DurableStore::MarkAllUnread() {
  for (auto& [key, entry] : entries_) entry.read = false;
}

bool DurableStore::Contains(Kind kind, uint64_t id) const {
  for (auto it = entries_.lower_bound({kind, id, 0});
       it != entries_.end() && std::get<0>(it->first) == kind && std::get<1>(it->first) == id;
       ++it) {
    return true;
  }
  return false;
}

void DurableReadPass::Begin(DurableStore* store) {
  entries_.clear();
  next_ = 0;
  if (store == nullptr) return;
  store->ForEach(
      [this](DurableStore::Kind kind, uint64_t id, std::string_view p) {
        const auto [producer, writer] = DurableStore::SequenceOf(kind, id);
        entries_.push_back({std::string(p), producer, writer});
      },
      /*changed_only=*/true, /*mark_read=*/true);
}

}  // namespace ringside::buffer
