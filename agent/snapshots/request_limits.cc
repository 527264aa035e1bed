#include "agent/snapshots/request_limits.h"

#include <utility>

namespace ringside::agent {
namespace {

// A request rule has no skip_probability: nothing draws.
double NeverDrawn() { return 1.0; }

}  // namespace

RequestLimits::RequestLimits(TriggerPolicy::Rule rule)
    : rule_(std::move(rule)), shared_({rule_}, NeverDrawn) {}

TriggerPolicy& RequestLimits::PolicyOf(uid_t uid) {
  if (auto it = by_uid_.find(uid); it != by_uid_.end()) return it->second;
  // Root's own always; another uid's while fewer than kMaxUids have theirs.
  if (uid != 0 && by_uid_.size() - by_uid_.count(0) >= kMaxUids) return shared_;
  return by_uid_.try_emplace(uid, std::vector<TriggerPolicy::Rule>{rule_}, NeverDrawn)
      .first->second;
}

TriggerPolicy::Verdict RequestLimits::Offer(uid_t uid, absl::Time now) {
  return PolicyOf(uid).Offer(rule_.name, now);
}

void RequestLimits::Replace(const TriggerPolicy::Rule& rule) {
  rule_ = rule;
  for (auto& [uid, policy] : by_uid_) policy.Replace({rule_});
  shared_.Replace({rule_});
}

TriggerPolicy::Counts RequestLimits::counts() const {
  TriggerPolicy::Counts total = shared_.counts();
  for (const auto& [uid, policy] : by_uid_) {
    const TriggerPolicy::Counts c = policy.counts();
    total.fired += c.fired;
    total.suppressed += c.suppressed;
  }
  return total;
}

}  // namespace ringside::agent
