#ifndef RINGSIDE_AGENT_DESCRIPTORS_CGROUP_PATH_CACHE_H_
#define RINGSIDE_AGENT_DESCRIPTORS_CGROUP_PATH_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace ringside::agent {

// The paths of cgroup ids seen, so that a process's cgroup is read from
// /proc once per cgroup rather than once per exec. At most `capacity`
// (an arbitrary one is forgotten for a new one: it is read again when
// needed). Not thread-safe: its owner's lock guards it.
class CgroupPathCache {
 public:
  explicit CgroupPathCache(size_t capacity) : capacity_(capacity) {}

  // Nothing for id 0 (unknown) or an empty path.
  void Remember(uint64_t id, const std::string& path);
  // Empty when `id` is 0 or not remembered.
  std::string Find(uint64_t id) const;
  size_t size() const { return paths_.size(); }

 private:
  size_t capacity_;
  absl::flat_hash_map<uint64_t, std::string> paths_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_CGROUP_PATH_CACHE_H_
