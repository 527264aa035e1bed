#ifndef RINGSIDE_AGENT_DESCRIPTORS_POD_NAMES_WAITLIST_H_
#define RINGSIDE_AGENT_DESCRIPTORS_POD_NAMES_WAITLIST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ringside/trace/process_tree.pb.h"

namespace ringside::agent {

// The processes of pods whose Kubernetes names are not all known yet, with
// their cgroups: the kubelet names a container only once it runs, so the
// names of its first process are looked up again (DescriptorTracker::
// RefreshPodNames) until found, the process ends, or kWaitNs passed.
// Bounded (kMaxWaiting). Not thread-safe: its owner's lock guards it.
class PodNamesWaitlist {
 public:
  // CLOCK_BOOTTIME, from the process's first description.
  static constexpr uint64_t kWaitNs = 30'000'000'000;
  static constexpr size_t kMaxWaiting = 1024;

  // Whether a process's descriptor (its cgroup's container and pod, and
  // their names, filled in) lacks names its cgroup may get: it names a pod,
  // and the pod is not named, or its container is not while it has one.
  static bool Lacks(const trace::ProcessTree::Process& described);

  // A description of process `pid` in `cgroup_path` at `ts`: it waits while
  // it Lacks() names and has not ended, and stops waiting otherwise.
  void Described(int32_t pid, const trace::ProcessTree::Process& described,
                 const std::string& cgroup_path, bool ended, uint64_t ts);
  void Ended(int32_t pid) { waiting_.erase(pid); }
  // The processes to look up again at `now_ns`, with their cgroups; those
  // that waited past kWaitNs are forgotten.
  std::vector<std::pair<int32_t, std::string>> Due(uint64_t now_ns);
  size_t size() const { return waiting_.size(); }

 private:
  struct Waiting {
    uint64_t since_ns = 0;
    std::string cgroup_path;
  };
  absl::flat_hash_map<int32_t, Waiting> waiting_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_POD_NAMES_WAITLIST_H_
