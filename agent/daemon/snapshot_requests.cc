// AgentService's snapshots asked for over the control socket (`ringside
// snapshot`): their limits, and `--wait` answered once the file is written
// without holding the control thread.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/control/control_frame.h"
#include "agent/daemon/agent_service.h"
#include "agent/daemon/internal/replies.h"
#include "agent/snapshots/snapshot_retention.h"

namespace ringside::agent {
namespace {

// `snapshot --wait` gets its answer within this, or an error saying the
// file may still come.
constexpr absl::Duration kSnapshotWaitLimit = absl::Minutes(5);

}  // namespace

using internal::Error;
using internal::SnapshotReply;
using internal::Who;

ControlHandler::Answer AgentService::Snapshot(const control::SnapshotRequest& request,
                                              const Peer& peer, const LaterReply& later) {
  const std::string reason = request.reason().empty() ? kRequestedSnapshotReason : request.reason();
  if (!IsUtf8(reason)) return Error("the snapshot reason is not UTF-8 text");
  if (reason.size() > kMaxSnapshotReasonBytes) {
    return Error(absl::StrCat("the snapshot reason is ", reason.size(), " bytes; at most ",
                              kMaxSnapshotReasonBytes));
  }
  {
    absl::MutexLock lock(&mu_);
    const TriggerPolicy::Verdict verdict = requests_.Offer(kRequestedSnapshotReason, absl::Now());
    if (verdict != TriggerPolicy::Verdict::kFire) {
      tally_.Count(reason, TriggerTally::Outcome::kSuppressed);
      const char* field = verdict == TriggerPolicy::Verdict::kCooldown
                              ? "snapshot_request_cooldown_ms"
                              : "max_snapshot_requests_per_hour";
      log_.LogLimited(
          LogLevel::kInfo, "snapshot request",
          absl::StrCat("snapshot asked by ", Who(peer), " (", reason, ") suppressed by ", field));
      return Error(absl::StrCat("snapshot request suppressed: the agent's ", field, " (",
                                field == std::string("snapshot_request_cooldown_ms")
                                    ? absl::StrCat(config_.snapshot_request_cooldown_ms(), " ms")
                                    : absl::StrCat(config_.max_snapshot_requests_per_hour()),
                                ") holds it back; counted in status"));
    }
  }
  absl::StatusOr<std::string> path =
      TakeSnapshot(RequestedSnapshotFileReason(reason), Who(peer),
                   SnapshotTrigger{reason, "ringside snapshot", static_cast<int32_t>(peer.uid),
                                   BoottimeNowNs()});
  if (!path.ok()) return Error(absl::StrCat("no snapshot: ", path.status().message()));
  if (request.wait()) return AnswerOnceWritten(*path, reason, later);
  return SnapshotReply(*path, reason);
}

ControlHandler::Answer AgentService::AnswerOnceWritten(const std::string& path,
                                                       const std::string& reason,
                                                       const LaterReply& later) {
  {
    absl::MutexLock lock(&waiters_mu_);
    snapshot_waiters_.emplace(path, SnapshotWaiter{reason, later});
  }
  // Done before it was listed: the writer's report passed it by. Asked
  // after listing it, so that one of the two answers it.
  if (absl::StatusOr<std::string> done = snapshots_->Wait(path, absl::ZeroDuration());
      !absl::IsDeadlineExceeded(done.status())) {
    AnswerSnapshotWaiters(path, done);
  }
  return Answer::Later(
      kSnapshotWaitLimit,
      Error(absl::StrCat("snapshot ", path, ": not written within ",
                         absl::FormatDuration(kSnapshotWaitLimit), "; it may still be")));
}

void AgentService::AnswerSnapshotWaiters(const std::string& path,
                                         const absl::StatusOr<std::string>& written) {
  std::vector<SnapshotWaiter> waiters;
  {
    absl::MutexLock lock(&waiters_mu_);
    auto [begin, end] = snapshot_waiters_.equal_range(path);
    for (auto it = begin; it != end; ++it) waiters.push_back(std::move(it->second));
    snapshot_waiters_.erase(begin, end);
  }
  for (const SnapshotWaiter& w : waiters) {
    w.later.Send(written.ok()
                     ? SnapshotReply(*written, w.reason)
                     : Error(absl::StrCat("snapshot ", path, ": ", written.status().message())));
  }
}

absl::StatusOr<std::string> AgentService::TakeSnapshot(const std::string& reason,
                                                       const std::string& by,
                                                       const SnapshotTrigger& trigger,
                                                       const std::vector<SnapshotTrigger>& joined) {
  if (stopping_) return absl::FailedPreconditionError("the agent is stopping");
  absl::StatusOr<std::string> path = snapshots_->Take(reason, trigger, joined);
  if (path.ok()) log_.Info(absl::StrCat("snapshot asked by ", by, " (", reason, "): ", *path));
  return path;
}

}  // namespace ringside::agent
