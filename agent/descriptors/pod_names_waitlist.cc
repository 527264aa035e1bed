#include "agent/descriptors/pod_names_waitlist.h"

namespace ringside::agent {

bool PodNamesWaitlist::Lacks(const trace::ProcessTree::Process& described) {
  return described.has_pod_uid() && (!described.has_k8s_pod() || (described.has_container_id() &&
                                                                  !described.has_k8s_container()));
}

void PodNamesWaitlist::Described(int32_t pid, const trace::ProcessTree::Process& described,
                                 const std::string& cgroup_path, bool ended, uint64_t ts) {
  if (ended || !Lacks(described)) {
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
