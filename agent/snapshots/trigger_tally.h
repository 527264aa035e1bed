#ifndef RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_
#define RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringside::agent {

// What became of every snapshot request the agent got, per trigger name,
// since it started: fired (a file of its own), joined (written into a
// snapshot already pending) or suppressed (held back by a limit). Each
// snapshot file carries the tally as of its write (trace_stats'
// ringside_triggers), so a trigger held back is never silently lost.
//
// Names come from the config (bounded) but also from manual snapshots'
// reasons, which any permitted client chooses: the first kMaxNames names
// get a row each, later ones share the row kOtherName, so memory stays
// bounded whatever the requests.
//
// Thread-safe.
class TriggerTally {
 public:
  enum class Outcome { kFired, kJoined, kSuppressed };
  struct Counts {
    std::string name;
    uint64_t fired = 0;
    uint64_t joined = 0;
    uint64_t suppressed = 0;
  };
  static constexpr size_t kMaxNames = 64;
  static constexpr char kOtherName[] = "other";

  void Count(absl::string_view name, Outcome outcome);
  // One row per name, in the order the names first came.
  std::vector<Counts> counts() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Counts> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_
