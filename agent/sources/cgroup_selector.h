#ifndef RINGSIDE_AGENT_SOURCES_CGROUP_SELECTOR_H_
#define RINGSIDE_AGENT_SOURCES_CGROUP_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ringside::agent {

// The cgroups linux.bpf's filter_container_id and filter_cgroup_path name on
// this machine now, as the cgroup ids its programs filter on. A container id
// (a prefix of 12 to 64 hex digits) names every cgroup whose path names a
// container with that id (ParseContainerIdentity): the container's own and
// any below it. A path names the cgroup at it, and only that one. Cgroups
// come and go, so the caller looks them up again now and then. Not
// thread-safe; Select() holds no state between calls.
class CgroupSelector {
 public:
  struct Selection {
    std::vector<uint64_t> cgroup_ids;  // Sorted, no duplicates, at most `max_cgroups`.
    // The configured values that name no cgroup now, in config order.
    std::vector<std::string> unmatched;
    // More cgroups matched than `max_cgroups`: the rest are left out.
    bool truncated = false;
  };
  // Walks every cgroup (cgroup_fs.h's ForEachCgroup), and finds a path's id.
  using CgroupWalk =
      std::function<void(const std::function<void(const std::string& path, uint64_t id)>&)>;
  using IdOfPath = std::function<std::optional<uint64_t>(const std::string& path)>;

  CgroupSelector(std::vector<std::string> container_ids, std::vector<std::string> cgroup_paths,
                 size_t max_cgroups);
  bool empty() const { return container_ids_.empty() && cgroup_paths_.empty(); }

  // On this machine's cgroup2 hierarchy.
  Selection Select() const;
  // On another (tests).
  Selection Select(const CgroupWalk& for_each_cgroup, const IdOfPath& id_of_path) const;

 private:
  std::vector<std::string> container_ids_;
  std::vector<std::string> cgroup_paths_;
  size_t max_cgroups_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_CGROUP_SELECTOR_H_
