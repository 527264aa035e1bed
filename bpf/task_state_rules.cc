#include "bpf/task_state_rules.h"

#include <cstddef>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bpf/task_state.h"

namespace ringside::bpf {
namespace {

struct Version {
  int major = 0, minor = 0, patch = 0;
  bool AtLeast(int ma, int mi, int pa = 0) const {
    if (major != ma) return major > ma;
    if (minor != mi) return minor > mi;
    return patch >= pa;
  }
  bool Series(int ma, int mi) const { return major == ma && minor == mi; }
};

// "6.18.44-fc-v669" -> 6.18.44; "6.8" -> 6.8.0. False without MAJOR.MINOR.
bool ParseRelease(absl::string_view release, Version* v) {
  const size_t end = release.find_first_not_of("0123456789.");
  const std::vector<absl::string_view> parts =
      absl::StrSplit(release.substr(0, end == absl::string_view::npos ? release.size() : end), '.');
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &v->major) ||
      !absl::SimpleAtoi(parts[1], &v->minor)) {
    return false;
  }
  if (parts.size() >= 3 && !absl::SimpleAtoi(parts[2], &v->patch)) v->patch = 0;
  return true;
}

}  // namespace

uint32_t TaskStateRulesForRelease(absl::string_view release) {
  Version v;
  if (!ParseRelease(release, &v)) return RS_TASK_STATE_RULES_NEWEST;
  uint32_t rules = 0;
  // Upstream 0d6b35283bcf (v6.6); in 6.1.y from 6.1.123, as a dependency
  // of the frozen-task change below.
  if (v.AtLeast(6, 6) || (v.Series(6, 1) && v.patch >= 123)) {
    rules |= RS_TASK_STATE_RULE_MASKED_IDLE;
  }
  // Upstream f718faf3940e (v6.13); backported in the stable releases of
  // 2 January 2025.
  if (v.AtLeast(6, 13) || (v.Series(6, 12) && v.patch >= 8) || (v.Series(6, 6) && v.patch >= 69) ||
      (v.Series(6, 1) && v.patch >= 123)) {
    rules |= RS_TASK_STATE_RULE_FROZEN_AS_D;
  }
  return rules;
}

}  // namespace ringside::bpf
