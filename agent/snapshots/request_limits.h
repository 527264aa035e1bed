#ifndef RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_
#define RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_

#include <sys/types.h>

#include <cstddef>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "agent/snapshots/trigger_policy.h"

namespace ringside::agent {

// The limits of snapshots asked for by hand (`ringside snapshot`):
// snapshot_request_cooldown_ms and max_snapshot_requests_per_hour, held
// for each requesting uid apart (the control socket's SO_PEERCRED), so that
// a member of control_group who spends the limit spends only their own:
// root's requests, and every other user's, still fire.
//
// Memory stays bounded whatever the peers: root (uid 0) always has limits
// of its own; other uids have theirs while fewer than kMaxUids have any
// (uids come from control_group's members, but one of them with
// subordinate uids can show many), and later ones share one set.
//
// Not thread-safe: the caller serialises calls (as TriggerPolicy).
class RequestLimits {
 public:
  static constexpr size_t kMaxUids = 64;

  // `rule`: TriggerPolicy::RequestRuleFrom the config.
  explicit RequestLimits(TriggerPolicy::Rule rule);

  // The verdict on a request from `uid` at `now` (kFire records it).
  TriggerPolicy::Verdict Offer(uid_t uid, absl::Time now);
  // New limits (config reload); every uid keeps its history.
  void Replace(const TriggerPolicy::Rule& rule);
  // Over every uid, since construction.
  TriggerPolicy::Counts counts() const;
  // The uids with limits of their own, root included.
  size_t uids_held() const { return by_uid_.size(); }

 private:
  TriggerPolicy& PolicyOf(uid_t uid);

  TriggerPolicy::Rule rule_;
  absl::flat_hash_map<uid_t, TriggerPolicy> by_uid_;
  // What the uids beyond kMaxUids share.
  TriggerPolicy shared_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_REQUEST_LIMITS_H_
