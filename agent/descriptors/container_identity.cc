#include "agent/descriptors/container_identity.h"

#include <vector>

#include "absl/strings/string_view.h"

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::agent {
namespace {

constexpr size_t kContainerIdDigits = 64;
constexpr size_t kShortContainerIdDigits = 12;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool IsIdDigits(absl::string_view id) {
  if (id.size() != kContainerIdDigits) return false;
  for (char c : id) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

// 8-4-4-4-12 lowercase hex digits, the groups joined by `sep`.
bool IsPodUid(absl::string_view s, char sep) {
  constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t at = 0;
  for (size_t g = 0; g < 5; g++) {
    if (g > 0) {
      if (at >= s.size() || s[at] != sep) return false;
      at++;
    }
    for (size_t i = 0; i < kGroups[g]; i++, at++) {
      if (at >= s.size() || !IsLowerHex(s[at])) return false;
    }
  }
  return at == s.size();
}

std::string WithDashes(absl::string_view uid) {
  std::string out(uid);
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return out;
}

// Systemd scope prefixes of the runtimes, and the names they take in
// containerd's "slice:prefix:id" form.
struct Runtime {
  absl::string_view prefix;
  absl::string_view name;
};
constexpr Runtime kRuntimes[] = {
    {"docker", "docker"},
    {"cri-containerd", "containerd"},
    {"crio", "cri-o"},
    {"libpod", "podman"},
};

// The container one path component names; `parent` is the component above
// it (empty at the top).
bool ContainerOfComponent(absl::string_view c, absl::string_view parent, ContainerIdentity* out) {
  if (const size_t colon = c.find(':'); colon != absl::string_view::npos) {
    // containerd's systemd-style name in a cgroupfs layout: slice:prefix:id.
    const std::vector<absl::string_view> parts = absl::StrSplit(c, ':');
    if (parts.size() != 3 || !IsIdDigits(parts[2])) return false;
    for (const Runtime& r : kRuntimes) {
      if (parts[1] == r.prefix) {
        out->container_id = std::string(parts[2]);
        out->runtime = std::string(r.name);
        return true;
      }
    }
    return false;
  }
  if (absl::ConsumeSuffix(&c, ".scope")) {
    // <prefix>-<id>.scope; a conmon scope (<prefix>-conmon-<id>) is not hex.
    for (const Runtime& r : kRuntimes) {
      absl::string_view id = c;
      if (absl::ConsumePrefix(&id, r.prefix) && absl::ConsumePrefix(&id, "-") && IsIdDigits(id)) {
        out->container_id = std::string(id);
        out->runtime = std::string(r.name);
        return true;
      }
    }
    return false;
  }
  if (!IsIdDigits(c)) return false;
  out->container_id = std::string(c);
  out->runtime = parent == "docker" ? "docker" : "";
  return true;
}

// The pod UID one component names: kubepods[-<qos>]-pod<uid_>.slice (also as
// the slice of a "slice:prefix:id" component), or pod<uid> right below
// kubepods or its QoS level.
bool PodOfComponent(const std::vector<absl::string_view>& parts, size_t i, std::string* uid) {
  absl::string_view c = parts[i];
  c = c.substr(0, c.find(':'));
  if (absl::ConsumeSuffix(&c, ".slice")) {
    const size_t pod = c.rfind("-pod");
    if (pod == absl::string_view::npos || !absl::StartsWith(c, "kubepods")) return false;
    const absl::string_view rest = c.substr(pod + 4);
    if (!IsPodUid(rest, '_')) return false;
    *uid = WithDashes(rest);
    return true;
  }
  if (!absl::ConsumePrefix(&c, "pod") || !IsPodUid(c, '-') || i == 0) return false;
  const absl::string_view parent = parts[i - 1];
  const bool under_kubepods =
      parent == "kubepods" ||
      ((parent == "burstable" || parent == "besteffort") && i >= 2 && parts[i - 2] == "kubepods");
  if (!under_kubepods) return false;
  *uid = std::string(c);
  return true;
}

}  // namespace

bool IsContainerId(std::string_view id) {
  return IsIdDigits(absl::string_view(id.data(), id.size()));
}

bool IsPodUid(std::string_view uid) {
  return IsPodUid(absl::string_view(uid.data(), uid.size()), '-');
}

std::string_view ShortContainerId(std::string_view container_id) {
  return container_id.substr(0, kShortContainerIdDigits);
}

ContainerIdentity ParseContainerIdentity(std::string_view cgroup_path_std) {
  const absl::string_view cgroup_path(cgroup_path_std.data(), cgroup_path_std.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(cgroup_path, '/', absl::SkipEmpty());
  ContainerIdentity out;
  // Deepest first: the container, then its pod at or above it.
  size_t pod_search_from = parts.size();
  for (size_t i = parts.size(); i-- > 0;) {
    if (ContainerOfComponent(parts[i], i > 0 ? parts[i - 1] : absl::string_view(), &out)) {
      pod_search_from = i + 1;
      break;
    }
  }
  for (size_t i = pod_search_from; i-- > 0;) {
    if (PodOfComponent(parts, i, &out.pod_uid)) break;
  }
  return out;
}

}  // namespace ringside::agent
