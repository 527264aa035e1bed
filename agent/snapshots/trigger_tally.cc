#include "agent/snapshots/trigger_tally.h"

#include <algorithm>

namespace ringside::agent {

void TriggerTally::Reserve(const std::vector<std::string>& names) {
  absl::MutexLock lock(&mu_);
  reserved_ = absl::flat_hash_set<std::string>(names.begin(), names.end());
}

void TriggerTally::Count(absl::string_view name, Outcome outcome) {
  absl::MutexLock lock(&mu_);
  auto find = [this](absl::string_view n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> Counts* {
    for (Counts& c : counts_) {
      if (c.name == n) return &c;
    }
    return nullptr;
  };
  Counts* row = find(name);
  if (row == nullptr && !reserved_.contains(name)) {
    const size_t unreserved = static_cast<size_t>(std::count_if(
        counts_.begin(), counts_.end(), [this](const Counts& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return c.name != kOtherName && !reserved_.contains(c.name);
        }));
    if (unreserved >= kMaxNames) {
      name = kOtherName;
      row = find(name);
    }
  }
  if (row == nullptr) row = &counts_.emplace_back(Counts{std::string(name)});
  switch (outcome) {
    case Outcome::kFired:
      row->fired++;
      break;
    case Outcome::kJoined:
      row->joined++;
      break;
    case Outcome::kSuppressed:
      row->suppressed++;
      break;
  }
}

std::vector<TriggerTally::Counts> TriggerTally::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace ringside::agent
