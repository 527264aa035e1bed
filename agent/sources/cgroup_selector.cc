#include "agent/sources/cgroup_selector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "agent/descriptors/cgroup_fs.h"
#include "agent/descriptors/container_identity.h"

namespace ringside::agent {
namespace {

// Bounds a walk of a hierarchy gone wild; a node has thousands at most.
constexpr size_t kMaxCgroupsWalked = 1 << 20;

}  // namespace

CgroupSelector::CgroupSelector(std::vector<std::string> container_ids,
                               std::vector<std::string> cgroup_paths, size_t max_cgroups)
    : container_ids_(std::move(container_ids)),
      cgroup_paths_(std::move(cgroup_paths)),
      max_cgroups_(max_cgroups) {}

CgroupSelector::Selection CgroupSelector::Select() const {
  return Select(
      [](const std::function<void(const std::string&, uint64_t)>& visit) {
        agent::ForEachCgroup(visit, kMaxCgroupsWalked);
      },
      CgroupIdOfPath);
}

CgroupSelector::Selection CgroupSelector::Select(const CgroupWalk& for_each_cgroup,
                                                 const IdOfPath& id_of_path) const {
  Selection out;
  std::vector<bool> matched(container_ids_.size() + cgroup_paths_.size(), false);
  for (size_t i = 0; i < cgroup_paths_.size(); i++) {
    if (std::optional<uint64_t> id = id_of_path(cgroup_paths_[i])) {
      out.cgroup_ids.push_back(*id);
      matched[container_ids_.size() + i] = true;
    }
  }
  if (!container_ids_.empty()) {
    for_each_cgroup([&](const std::string& path, uint64_t id) {
      const ContainerIdentity c = ParseContainerIdentity(path);
      if (c.container_id.empty()) return;
      for (size_t i = 0; i < container_ids_.size(); i++) {
        if (absl::StartsWith(c.container_id, container_ids_[i])) {
          out.cgroup_ids.push_back(id);
          matched[i] = true;
        }
      }
    });
  }
  for (size_t i = 0; i < matched.size(); i++) {
    if (matched[i]) continue;
    out.unmatched.push_back(i < container_ids_.size() ? container_ids_[i]
                                                      : cgroup_paths_[i - container_ids_.size()]);
  }
  std::sort(out.cgroup_ids.begin(), out.cgroup_ids.end());
  out.cgroup_ids.erase(std::unique(out.cgroup_ids.begin(), out.cgroup_ids.end()),
                       out.cgroup_ids.end());
  if (out.cgroup_ids.size() > max_cgroups_) {
    out.cgroup_ids.resize(max_cgroups_);
    out.truncated = true;
  }
  return out;
}

}  // namespace ringside::agent
