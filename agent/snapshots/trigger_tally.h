#ifndef RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_
#define RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringside::agent {

// What became of every snapshot request the agent got, per trigger name,
// since it started: fired (a file of its own), joined (written into a
// snapshot already pending) or suppressed (held back by a limit). Each
// snapshot file carries the tally as of its write (trace_stats'
// ringside_triggers), and the metrics label their counts by these names,
// so a trigger held back is never silently lost.
//
// Names are the agent's own, never a client's text: the config's triggers,
// "request" for every `ringside snapshot` whatever its reason, "signal".
// The names Reserve() was given (the running config's, the fixed ones)
// always get a row of their own. Other names (triggers a reload removed)
// get one each while fewer than kMaxNames of them have one, and later ones
// share the row kOtherName, so memory stays bounded whatever the reloads,
// and no number of them can push a configured trigger into "other".
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

  // The names that always get a row of their own, from now on (the config's
  // trigger names and the fixed ones; a reload gives the new set). Rows of
  // names no longer reserved stay, counted among the others.
  void Reserve(const std::vector<std::string>& names);
  void Count(absl::string_view name, Outcome outcome);
  // One row per name, in the order the names first came.
  std::vector<Counts> counts() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Counts> counts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> reserved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_TALLY_H_
