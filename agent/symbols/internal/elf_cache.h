#ifndef RINGSIDE_AGENT_SYMBOLS_INTERNAL_ELF_CACHE_H_
#define RINGSIDE_AGENT_SYMBOLS_INTERNAL_ELF_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/symbols/elf_file.h"

namespace ringside::agent::internal {

// A file as fstat() tells it apart: the same (dev, inode, mtime, size) is
// the same contents, whichever process maps it and under which path.
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t inode = 0;
  int64_t mtime_ns = 0;
  int64_t size = 0;

  friend bool operator==(const FileIdentity& a, const FileIdentity& b) {
    return std::tie(a.dev, a.inode, a.mtime_ns, a.size) ==
           std::tie(b.dev, b.inode, b.mtime_ns, b.size);
  }
  template <typename H>
  friend H AbslHashValue(H h, const FileIdentity& f) {
    return H::combine(std::move(h), f.dev, f.inode, f.mtime_ns, f.size);
  }
};

// The parsed ElfFiles of UserSymbolizer, least recently used first out,
// within a budget of bytes (ElfFile::memory_bytes() plus the entry's own).
//
// An entry is keyed by its build id (hex), or for a file without one by
// "file:" and its identity, so that one libc mapped by a hundred processes,
// or in two containers from two paths, is parsed and held once. A second
// index from file identity to entry skips opening and parsing a file seen
// before.
//
// Handles: a Handle stays usable while generation() is unchanged (nothing
// evicted since); Use() on it is O(1) and marks the entry used. Not
// thread-safe: its UserSymbolizer's thread only.
class ElfCache {
 private:
  struct Entry {
    std::string key;
    std::string build_id_hex;
    ElfFile file;
    size_t bytes = 0;
    std::vector<FileIdentity> identities;
  };

 public:
  struct Handle {
    std::list<Entry>::iterator entry;
    uint64_t generation = 0;
  };

  explicit ElfCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  ElfCache(const ElfCache&) = delete;
  ElfCache& operator=(const ElfCache&) = delete;

  // The entry of a file seen before, or of `key`; false if none.
  bool FindByIdentity(const FileIdentity& identity, Handle* handle);
  bool FindByKey(const std::string& key, Handle* handle);
  // Remembers that the file `identity` holds the entry of `h` (another file
  // with the same build id), so that FindByIdentity finds it. An entry
  // remembers its kMaxIdentities newest files: each container that maps the
  // same libc from its own overlay (another dev) adds one, for as long as
  // the agent runs. One forgotten costs a parse of that file on its next
  // mapping, which finds the entry again by key. REQUIRES: Valid(h).
  void AddIdentity(const Handle& h, const FileIdentity& identity);
  static constexpr size_t kMaxIdentities = 64;

  // Adds `file` under `key`, evicting the least recently used entries until
  // it fits. False (nothing added) when it alone is over the budget.
  bool Insert(std::string key, const FileIdentity& identity, ElfFile file, Handle* handle);

  bool Valid(const Handle& h) const { return h.generation == generation_; }
  // REQUIRES: Valid(h). Marks the entry most recently used.
  const ElfFile& Use(const Handle& h);
  const std::string& BuildIdHex(const Handle& h) const { return h.entry->build_id_hex; }
  const std::string& KeyOf(const Handle& h) const { return h.entry->key; }

  uint64_t generation() const { return generation_; }
  uint64_t evictions() const { return evictions_; }
  size_t size() const { return lru_.size(); }
  // The entries' bytes, their identities past the first included (those
  // may take it past the budget until the next Insert evicts).
  size_t memory_bytes() const { return bytes_; }
  // Files the entry of `h` is known by. REQUIRES: Valid(h).
  size_t IdentitiesOf(const Handle& h) const { return h.entry->identities.size(); }

 private:
  void Evict();

  const size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t generation_ = 1;
  uint64_t evictions_ = 0;
  std::list<Entry> lru_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_;
  absl::flat_hash_map<FileIdentity, std::list<Entry>::iterator> by_identity_;
};

}  // namespace ringside::agent::internal

#endif  // RINGSIDE_AGENT_SYMBOLS_INTERNAL_ELF_CACHE_H_
