#include "agent/descriptors/pod_names_waitlist.h"

#include "agent/descriptors/container_identity.h"

namespace ringside::agent {

bool PodNamesWaitlist::Lacks(const std::string& cgroup_path, const std::optional<PodNames>& pod) {
  if (cgroup_path.empty()) return false;
  if (pod.has_value() && !pod->container.empty()) return false;
  const ContainerIdentity id = ParseContainerIdentity(cgroup_path);
  return !id.pod_uid.empty() && (!pod.has_value() || !id.container_id.empty());
}

void PodNamesWaitlist::Described(int32_t pid, const std::string& cgroup_path,
                                 const std::optional<PodNames>& pod, bool ended, uint64_t ts) {
  if (ended || !Lacks(cgroup_path, pod)) {
    waiting_.erase(pid);
    return;
  }
  auto it = waiting_.find(pid);
  if (it != waiting_.end()) {
    it->second.cgroup_path = cgroup_path;
  } else if (waiting_.size() < kMaxWaiting) {
    waiting_.emplace(pid, Waiting{ts, cgroup_path});
  }
}

std::vector<std::pair<int32_t, std::string>> PodNamesWaitlist::Due(uint64_t now_ns) {
  std::vector<std::pair<int32_t, std::string>> due;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (now_ns > it->second.since_ns + kWaitNs) {
      waiting_.erase(it++);
      continue;
    }
    due.emplace_back(it->first, it->second.cgroup_path);
    ++it;
  }
  return due;
}

}  // namespace ringside::agent
