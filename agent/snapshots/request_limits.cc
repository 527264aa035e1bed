#include "agent/snapshots/request_limits.h"

namespace ringside::agent {
namespace {

// A request rule has no skip_probability: nothing draws.
double NeverDrawn() { return 1.0; }

}  // namespace

RequestLimits::RequestLimits(const TriggerPolicy::Rule& rule)
    : name_(rule.name), root_({rule}, NeverDrawn), others_({rule}, NeverDrawn) {}

TriggerPolicy::Verdict RequestLimits::Offer(uid_t uid, absl::Time now) {
  return (uid == 0 ? root_ : others_).Offer(name_, now);
}

void RequestLimits::Replace(const TriggerPolicy::Rule& rule) {
  name_ = rule.name;
  root_.Replace({rule});
  others_.Replace({rule});
}

TriggerPolicy::Counts RequestLimits::counts() const {
  TriggerPolicy::Counts total = root_.counts();
  total.fired += others_.counts().fired;
  total.suppressed += others_.counts().suppressed;
  return total;
}

}  // namespace ringside::agent
