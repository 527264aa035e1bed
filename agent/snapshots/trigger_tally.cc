#include "agent/snapshots/trigger_tally.h"

namespace ringside::agent {

void TriggerTally::Count(absl::string_view name, Outcome outcome) {
  absl::MutexLock lock(&mu_);
  Counts* row = nullptr;
  for (Counts& c : counts_) {
    if (c.name == name) row = &c;
  }
  if (row == nullptr && counts_.size() >= kMaxNames) {
    for (Counts& c : counts_) {
      if (c.name == kOtherName) row = &c;
    }
    name = kOtherName;
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
