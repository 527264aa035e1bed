#ifndef RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_
#define RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_

#include <sys/types.h>

#include "absl/time/time.h"
#include "agent/snapshots/trigger_policy.h"

namespace ringside::agent {

// The limits of snapshots asked for by hand (`ringside snapshot`):
// snapshot_request_cooldown_ms and max_snapshot_requests_per_hour, held
// twice: once for root (uid 0, the control socket's SO_PEERCRED) and once
// for every other uid together. A member of control_group who spends the
// limit spends it for the other members, never root's: root's requests
// still fire. The others share one set, not one each, so that the
// configured limit still bounds what they all make the agent write
// (a member with subordinate uids could otherwise multiply it).
//
// Not thread-safe: the caller serialises calls (as TriggerPolicy).
class RequestLimits {
 public:
  // `rule`: TriggerPolicy::RequestRuleFrom the config.
  explicit RequestLimits(const TriggerPolicy::Rule& rule);

  // The verdict on a request from `uid` at `now` (kFire records it).
  TriggerPolicy::Verdict Offer(uid_t uid, absl::Time now);
  // New limits (config reload); both sets keep their history.
  void Replace(const TriggerPolicy::Rule& rule);
  // Root's and the others' together, since construction.
  TriggerPolicy::Counts counts() const;

 private:
  std::string name_;
  TriggerPolicy root_;
  TriggerPolicy others_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_
