#include "agent/descriptors/cgroup_path_cache.h"

namespace ringside::agent {

void CgroupPathCache::Remember(uint64_t id, const std::string& path) {
  if (id == 0 || path.empty()) return;
  if (paths_.size() >= capacity_ && !paths_.contains(id)) paths_.erase(paths_.begin());
  paths_[id] = path;
}

std::string CgroupPathCache::Find(uint64_t id) const {
  auto it = paths_.find(id);
  return it == paths_.end() ? std::string() : it->second;
}

}  // namespace ringside::agent
