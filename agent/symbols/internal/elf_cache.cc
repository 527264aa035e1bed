#include "agent/symbols/internal/elf_cache.h"

#include <utility>

namespace ringside::agent::internal {
namespace {

// What an entry costs besides its ElfFile: the node, its key twice (entry
// and index), the hex, an identity and both index slots, roughly.
size_t EntryOverhead(const std::string& key) {
  return 160 + 2 * key.size() + 2 * sizeof(FileIdentity);
}

// An identity added to an entry: its place in the entry's list and its
// slot in the index, roughly.
constexpr size_t kIdentityBytes = 2 * sizeof(FileIdentity) + 16;

}  // namespace

bool ElfCache::FindByIdentity(const FileIdentity& identity, Handle* handle) {
  auto it = by_identity_.find(identity);
  if (it == by_identity_.end()) return false;
  *handle = {it->second, generation_};
  return true;
}

bool ElfCache::FindByKey(const std::string& key, Handle* handle) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  *handle = {it->second, generation_};
  return true;
}

void ElfCache::AddIdentity(const Handle& h, const FileIdentity& identity) {
  if (!by_identity_.emplace(identity, h.entry).second) return;
  std::vector<FileIdentity>& ids = h.entry->identities;
  if (ids.size() >= kMaxIdentities) {
    // The oldest goes; the entry's first (its own file's) is the oldest.
    by_identity_.erase(ids.front());
    ids.erase(ids.begin());
  } else {
    h.entry->bytes += kIdentityBytes;
    bytes_ += kIdentityBytes;
  }
  ids.push_back(identity);
}

bool ElfCache::Insert(std::string key, const FileIdentity& identity, ElfFile file, Handle* handle) {
  const size_t bytes = file.memory_bytes() + EntryOverhead(key);
  if (bytes > max_bytes_) return false;
  while (!lru_.empty() && bytes_ + bytes > max_bytes_) Evict();
  std::string hex = file.build_id_hex();
  lru_.push_front(Entry{key, std::move(hex), std::move(file), bytes, {identity}});
  by_key_[std::move(key)] = lru_.begin();
  by_identity_[identity] = lru_.begin();
  bytes_ += bytes;
  *handle = {lru_.begin(), generation_};
  return true;
}

const ElfFile& ElfCache::Use(const Handle& h) {
  lru_.splice(lru_.begin(), lru_, h.entry);
  return h.entry->file;
}

void ElfCache::Evict() {
  const Entry& e = lru_.back();
  by_key_.erase(e.key);
  for (const FileIdentity& id : e.identities) by_identity_.erase(id);
  bytes_ -= e.bytes;
  lru_.pop_back();
  ++evictions_;
  ++generation_;
}

}  // namespace ringside::agent::internal
