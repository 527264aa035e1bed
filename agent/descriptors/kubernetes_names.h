#ifndef RINGSIDE_AGENT_DESCRIPTORS_KUBERNETES_NAMES_H_
#define RINGSIDE_AGENT_DESCRIPTORS_KUBERNETES_NAMES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/descriptors/container_identity.h"

namespace ringside::agent {

// The Kubernetes names of a container: what `kubectl get pods -n NAMESPACE`
// and `kubectl logs POD -c CONTAINER` take. `container` is empty for a
// pod's own processes outside its containers (the sandbox's pause process).
struct PodNames {
  std::string pod_namespace;
  std::string pod;
  std::string container;

  bool operator==(const PodNames&) const = default;
};

// Finds the namespace, pod and container names of a pod UID and container
// id, as the kubelet lays out its containers' logs on the node, without the
// API server:
//
//   <log_dir>/pods/<namespace>_<pod>_<pod uid>/<container>/<restart>.log
//   <log_dir>/containers/<pod>_<namespace>_<container>-<container id>.log
//                                  (a symlink into pods/; never followed)
//
// Every runtime the kubelet drives (containerd, CRI-O, Docker through
// cri-dockerd) gets this layout from the kubelet itself, which makes it
// before a container starts and removes it when the pod is gone; log
// shippers (Fluent Bit, Vector) read the same names. Names are Kubernetes
// names (lowercase letters, digits, '-' and '.'), so '_' separates them
// unambiguously; an entry that is not laid out so is skipped.
//
// The directories are read again when a lookup misses, at most once per
// kRescanInterval, so pods that come and go are found and forgotten; what
// it holds is bounded (kMaxPods, kMaxContainers). Thread-safe.
class KubernetesNames {
 public:
  static constexpr char kDefaultLogDir[] = "/var/log";
  static constexpr size_t kMaxPods = 4096;
  static constexpr size_t kMaxContainers = 16384;
  static constexpr int64_t kRescanIntervalNs = 1'000'000'000;

  struct Stats {
    size_t pods = 0;        // Known now.
    size_t containers = 0;  // Known now.
    uint64_t scans = 0;     // Reads of the directories.
    uint64_t skipped = 0;   // Entries not laid out as the kubelet does, in the last scan.
  };

  // `now_ns`: a monotonic clock (tests pass their own).
  explicit KubernetesNames(std::string log_dir = kDefaultLogDir,
                           std::function<int64_t()> now_ns = nullptr);

  // The names of the pod and container `id` names; nullopt when it names
  // no pod or the node has no such pod. A container the kubelet has no log
  // of (the sandbox) leaves `container` empty.
  std::optional<PodNames> Lookup(const ContainerIdentity& id) ABSL_LOCKS_EXCLUDED(mu_);

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pod {
    std::string pod_namespace;
    std::string name;
  };
  // Reads both directories anew, when the last read is kRescanIntervalNs
  // old. Reads without the lock; swaps the result in under it.
  void MaybeRescan() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string log_dir_;
  const std::function<int64_t()> now_ns_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pod> pods_ ABSL_GUARDED_BY(mu_);  // By pod UID.
  // Container id -> its name.
  absl::flat_hash_map<std::string, std::string> containers_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> last_scan_ns_ ABSL_GUARDED_BY(mu_);
  bool scanning_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// The node's names, read from kDefaultLogDir: one per agent, shared by
// whatever describes processes.
KubernetesNames& NodeKubernetesNames();

// Whether `name` is a Kubernetes name: 1 to 253 lowercase letters, digits,
// '-' and '.', starting and ending with a letter or digit.
bool IsKubernetesName(std::string_view name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_KUBERNETES_NAMES_H_
