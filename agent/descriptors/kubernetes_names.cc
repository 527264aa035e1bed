#include "agent/descriptors/kubernetes_names.h"

#include <dirent.h>
#include <time.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::agent {
namespace {

constexpr size_t kMaxNameBytes = 253;

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string_view Std(absl::string_view s) { return {s.data(), s.size()}; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

// Calls `visit` with the name of each entry of `dir` but "." and "..".
void ForEachEntry(const std::string& dir, const std::function<void(absl::string_view)>& visit) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const absl::string_view name(e->d_name);
    if (name != "." && name != "..") visit(name);
  }
  closedir(d);
}

}  // namespace

bool IsKubernetesName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  auto alnum = [](char c) { return c != '-' && c != '.'; };
  return alnum(name.front()) && alnum(name.back());
}

KubernetesNames::KubernetesNames(std::string log_dir, std::function<int64_t()> now_ns)
    : log_dir_(std::move(log_dir)), now_ns_(now_ns ? std::move(now_ns) : MonotonicNs) {}

std::optional<PodNames> KubernetesNames::Lookup(const ContainerIdentity& id) {
  if (id.pod_uid.empty()) return std::nullopt;
  for (bool rescanned : {false, true}) {
    {
      absl::MutexLock lock(&mu_);
      auto pod = pods_.find(id.pod_uid);
      const bool container_known = id.container_id.empty() || containers_.contains(id.container_id);
      if (pod != pods_.end() && (container_known || rescanned)) {
        PodNames names{pod->second.pod_namespace, pod->second.name, {}};
        if (auto c = containers_.find(id.container_id); c != containers_.end()) {
          names.container = c->second;
        }
        return names;
      }
      if (rescanned) return std::nullopt;
    }
    MaybeRescan();
  }
  return std::nullopt;
}

void KubernetesNames::MaybeRescan() {
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = now_ns_();
    if (scanning_ || (last_scan_ns_.has_value() && now - *last_scan_ns_ < kRescanIntervalNs)) {
      return;
    }
    scanning_ = true;
    last_scan_ns_ = now;
  }
  uint64_t skipped = 0;
  // pods/<namespace>_<pod>_<uid>
  absl::flat_hash_map<std::string, Pod> pods;
  ForEachEntry(log_dir_ + "/pods", [&](absl::string_view entry) {
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, '_');
    if (parts.size() != 3 || !IsKubernetesName(Std(parts[0])) || !IsKubernetesName(Std(parts[1])) ||
        !IsPodUid(Std(parts[2]))) {
      skipped++;
      return;
    }
    if (pods.size() < kMaxPods) pods[parts[2]] = Pod{std::string(parts[0]), std::string(parts[1])};
  });
  // containers/<pod>_<namespace>_<container>-<id>.log
  absl::flat_hash_map<std::string, std::string> containers;
  ForEachEntry(log_dir_ + "/containers", [&](absl::string_view entry) {
    absl::string_view rest = entry;
    const bool log = absl::ConsumeSuffix(&rest, ".log");
    const size_t dash = rest.rfind('-');
    if (!log || dash == absl::string_view::npos) {
      skipped++;
      return;
    }
    const absl::string_view container_id = rest.substr(dash + 1);
    const std::vector<absl::string_view> parts = absl::StrSplit(rest.substr(0, dash), '_');
    if (!IsContainerId(Std(container_id)) || parts.size() != 3 ||
        !IsKubernetesName(Std(parts[2]))) {
      skipped++;
      return;
    }
    if (containers.size() < kMaxContainers) containers[container_id] = std::string(parts[2]);
  });
  absl::MutexLock lock(&mu_);
  pods_ = std::move(pods);
  containers_ = std::move(containers);
  scanning_ = false;
  stats_.scans++;
  stats_.skipped = skipped;
}

KubernetesNames::Stats KubernetesNames::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.pods = pods_.size();
  s.containers = containers_.size();
  return s;
}

KubernetesNames& NodeKubernetesNames() {
  static KubernetesNames* names = new KubernetesNames();
  return *names;
}

}  // namespace ringside::agent
