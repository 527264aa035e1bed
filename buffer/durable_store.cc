#include "buffer/durable_store.h"

#include <algorithm>
#include <vector>

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
  // and the entry), and the key's place in ended_ (a deque's 512-byte
  // blocks: 21 keys each), counted for every entry, as any may end.
  return MallocChunk(4 * sizeof(void*) + sizeof(std::pair<const Key, Entry>)) + 32;
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

void DurableStore::Remove(std::map<Key, Entry>::iterator it) {
  stats_.bytes -= CostOf(it->second);
  stats_.entries--;
  if (it->second.ended) {
    if (!ended_.empty() && ended_.front() == it->first) {
      ended_.pop_front();  // Always so: ended entries go in the order they ended.
    } else if (auto key = std::find(ended_.begin(), ended_.end(), it->first); key != ended_.end()) {
      ended_.erase(key);
    }
  }
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
    Remove(entries_.find(ended_.front()));
    stats_.evicted_ended++;
    return true;
  }
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.ended) continue;
    if (oldest == entries_.end() || it->second.order < oldest->second.order) oldest = it;
  }
  if (oldest == entries_.end()) return false;
  Remove(oldest);
  stats_.evicted_live++;
  return true;
}

void DurableStore::Replace(std::map<Key, Entry>::iterator it, std::string_view packet) {
  stats_.bytes -= CostOf(it->second);
  // A string of its own size (an assign would keep a larger one's heap).
  it->second.packet = std::string(packet);
  it->second.order = ++order_;
  it->second.read = false;
  stats_.bytes += CostOf(it->second);
  stats_.replaced++;
}

void DurableStore::MakeRoom() {
  // Ended entries first, the first ended first; then live ones, the least
  // recently written first, counted. The entry just written is the newest,
  // so it goes last.
  while (stats_.bytes > capacity_) {
    if (!EvictOne(/*ended=*/true) && !EvictOne(/*ended=*/false)) break;
  }
  stats_.max_bytes = std::max(stats_.max_bytes, stats_.bytes);
}

std::map<DurableStore::Key, DurableStore::Entry>::iterator DurableStore::Newest(Kind kind,
                                                                                uint64_t id) {
  auto it = entries_.upper_bound({kind, id, UINT64_MAX});
  if (it == entries_.begin()) return entries_.end();
  --it;
  if (std::get<0>(it->first) != kind || std::get<1>(it->first) != id) return entries_.end();
  return it;
}

std::map<DurableStore::Key, DurableStore::Entry>::iterator DurableStore::Live(Kind kind,
                                                                              uint64_t id) {
  auto it = Newest(kind, id);
  return it != entries_.end() && !it->second.ended ? it : entries_.end();
}

void DurableStore::Put(Kind kind, uint64_t id, std::string_view packet) {
  stats_.writes++;
  const size_t cost = EntryCost(packet.size());
  if (cost > capacity_) {
    stats_.rejected++;
    return;
  }
  if (auto live = Live(kind, id); live != entries_.end()) {
    Replace(live, packet);
  } else {
    Entry e;
    e.packet = std::string(packet);
    e.order = ++order_;
    auto it = entries_.emplace(Key{kind, id, ++generation_}, std::move(e)).first;
    stats_.bytes += CostOf(it->second);
    stats_.entries++;
  }
  MakeRoom();
}

void DurableStore::PutEnded(Kind kind, uint64_t id, std::string_view packet) {
  auto newest = Newest(kind, id);
  if (newest == entries_.end() || !newest->second.ended) {
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
  auto it = Live(kind, id);
  if (it == entries_.end()) return;
  it->second.ended = true;
  it->second.drains_to_pin = kDrainsBeforePinning;
  ended_.push_back(it->first);
}

void DurableStore::Drained(uint64_t ring_bytes_written) {
  // Those still waiting to be pinned ended last: from the newest back.
  for (auto key = ended_.rbegin(); key != ended_.rend(); ++key) {
    Entry& e = entries_.find(*key)->second;
    if (e.drains_to_pin == 0) break;
    if (--e.drains_to_pin == 0) e.ended_at = ring_bytes_written;
  }
  // Everything written before an end has been overwritten once a ring's
  // worth (and an eighth, for what the ring's reader holds back) has been
  // written past it: the oldest ends first.
  while (!ended_.empty()) {
    auto it = entries_.find(ended_.front());
    const Entry& e = it->second;
    if (e.drains_to_pin != 0 || ring_bytes_written - e.ended_at <= ring_size_ + ring_size_ / 8) {
      break;
    }
    Remove(it);
    stats_.compacted++;
  }
}

void DurableStore::ForEach(
    const std::function<void(Kind, uint64_t id, std::string_view packet)>& visit, bool changed_only,
    bool mark_read) {
  std::vector<std::pair<uint64_t, std::map<Key, Entry>::iterator>> order;
  order.reserve(entries_.size());
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (changed_only && it->second.read) continue;
    order.emplace_back(it->second.order, it);
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [o, it] : order) {
    visit(std::get<0>(it->first), std::get<1>(it->first), it->second.packet);
    if (mark_read) it->second.read = true;
  }
}

std::unique_ptr<DurableStore> DurableStore::Clone() const {
  auto clone = std::make_unique<DurableStore>(*this);
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
