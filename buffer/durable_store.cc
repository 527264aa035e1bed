#include "buffer/durable_store.h"

#include <algorithm>
#include <vector>

namespace ringside::buffer {

// Each entry also costs its bookkeeping; counted so that a store of many
// tiny entries still stays within its capacity in memory.
constexpr size_t kEntryOverhead = 64;

DurableStore::DurableStore(size_t capacity, size_t ring_size)
    : capacity_(capacity), ring_size_(ring_size) {
  stats_.capacity = capacity;
}

void DurableStore::Remove(std::map<Key, Entry>::iterator it) {
  stats_.bytes -= it->second.packet.size() + kEntryOverhead;
  stats_.entries--;
  if (!it->second.ended) {
    live_.erase({std::get<0>(it->first), std::get<1>(it->first)});
  } else if (!ended_.empty() && ended_.front() == it->first) {
    ended_.pop_front();  // Always so: ended entries go in the order they ended.
  } else if (auto key = std::find(ended_.begin(), ended_.end(), it->first); key != ended_.end()) {
    ended_.erase(key);
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
  stats_.bytes -= it->second.packet.size();
  it->second.packet.assign(packet.data(), packet.size());
  it->second.order = ++order_;
  it->second.read = false;
  stats_.bytes += packet.size();
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

void DurableStore::Put(Kind kind, uint64_t id, std::string_view packet) {
  stats_.writes++;
  const size_t cost = packet.size() + kEntryOverhead;
  if (cost > capacity_) {
    stats_.rejected++;
    return;
  }
  auto live = live_.find({kind, id});
  if (live != live_.end()) {
    Replace(entries_.find({kind, id, live->second}), packet);
  } else {
    const uint64_t generation = ++generation_;
    Entry e;
    e.packet.assign(packet.data(), packet.size());
    e.order = ++order_;
    entries_.emplace(Key{kind, id, generation}, std::move(e));
    live_[{kind, id}] = generation;
    stats_.bytes += cost;
    stats_.entries++;
  }
  MakeRoom();
}

void DurableStore::PutEnded(Kind kind, uint64_t id, std::string_view packet) {
  if (!live_.contains({kind, id})) {
    auto newest = entries_.upper_bound({kind, id, UINT64_MAX});
    if (newest != entries_.begin()) {
      --newest;
      if (std::get<0>(newest->first) == kind && std::get<1>(newest->first) == id) {
        if (packet.size() + kEntryOverhead > capacity_) {
          stats_.writes++;
          stats_.rejected++;
          return;
        }
        stats_.writes++;
        Replace(newest, packet);
        MakeRoom();
        return;
      }
    }
  }
  Put(kind, id, packet);
  MarkEnded(kind, id);
}

void DurableStore::MarkEnded(Kind kind, uint64_t id) {
  auto live = live_.find({kind, id});
  if (live == live_.end()) return;
  auto it = entries_.find({kind, id, live->second});
  it->second.ended = true;
  it->second.drains_to_pin = kDrainsBeforePinning;
  live_.erase(live);
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
