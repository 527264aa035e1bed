// AgentService's snapshots asked for over the control socket (`ringside
// snapshot`, `ringside trigger`): their limits, and `--wait` answered once
// the file is written without holding the control thread.

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <optional>
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

// `--around`'s window must have ended (ringside snapshot waits for its end
// before asking); a second of slack for the moment the request took to
// come.
constexpr absl::Duration kWindowEndSlack = absl::Seconds(1);

int64_t RealtimeNowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

using internal::Error;
using internal::SnapshotReply;
using internal::Who;

absl::StatusOr<AgentService::AskedWindow> AgentService::WindowOf(
    const control::SnapshotRequest& request) {
  const absl::Duration window = request.window_ns() == 0
                                    ? kDefaultSnapshotWindow
                                    : absl::Nanoseconds(static_cast<int64_t>(
                                          std::min<uint64_t>(request.window_ns(), INT64_MAX)));
  if (window > kMaxSnapshotWindow) {
    return absl::InvalidArgumentError(absl::StrCat("the window is ", absl::FormatDuration(window),
                                                   "; at most ",
                                                   absl::FormatDuration(kMaxSnapshotWindow)));
  }
  // REALTIME to BOOTTIME by the offset between them now.
  const int64_t boot_now = BoottimeNowNs();
  const int64_t offset = RealtimeNowNs() - boot_now;
  const int64_t half = absl::ToInt64Nanoseconds(window / 2);
  const int64_t around = request.around_unix_ns();
  AskedWindow asked;
  int64_t first, last;
  if (__builtin_sub_overflow(around, half, &asked.first_unix_ns) ||
      __builtin_add_overflow(around, half, &asked.last_unix_ns) ||
      __builtin_sub_overflow(asked.first_unix_ns, offset, &first) ||
      __builtin_sub_overflow(asked.last_unix_ns, offset, &last)) {
    return absl::InvalidArgumentError("the moment is out of range");
  }
  if (last > boot_now + absl::ToInt64Nanoseconds(kWindowEndSlack)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the window ", FormatRealtime(asked.first_unix_ns), " .. ",
                     FormatRealtime(asked.last_unix_ns), " ends ",
                     absl::FormatDuration(absl::Nanoseconds(last - boot_now)),
                     " from now: ask once it has passed (ringside snapshot --around waits)"));
  }
  if (last < 0) return absl::InvalidArgumentError("the window ends before this machine booted");
  asked.boottime = {static_cast<uint64_t>(std::max<int64_t>(first, 0)),
                    static_cast<uint64_t>(last)};
  return asked;
}

ControlHandler::Answer AgentService::Snapshot(const control::SnapshotRequest& request,
                                              const Peer& peer, const LaterReply& later) {
  const std::string reason = request.reason().empty() ? kRequestedSnapshotReason : request.reason();
  if (!IsUtf8(reason)) return Error("the snapshot reason is not UTF-8 text");
  if (reason.size() > kMaxSnapshotReasonBytes) {
    return Error(absl::StrCat("the snapshot reason is ", reason.size(), " bytes; at most ",
                              kMaxSnapshotReasonBytes));
  }
  // A request refused for its window is refused before the limits see it:
  // it must not spend the requester's cooldown.
  std::optional<AskedWindow> window;
  if (request.has_around_unix_ns()) {
    absl::StatusOr<AskedWindow> w = WindowOf(request);
    if (!w.ok()) return Error(absl::StrCat("no snapshot: ", w.status().message()));
    window = *w;
    // Over before the agent started: no file would hold any of it, so none
    // is written (a fan-out must not push useful snapshots out).
    const int64_t start = session_->start_boottime_ns();
    if (static_cast<int64_t>(window->boottime.last_ns) < start) {
      const int64_t offset = RealtimeNowNs() - BoottimeNowNs();
      return Error(absl::StrCat(
          "the ring no longer holds the window ", FormatRealtime(window->first_unix_ns), " .. ",
          FormatRealtime(window->last_unix_ns),
          ": it ended before this agent started recording, at ", FormatRealtime(start + offset)));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    // Each uid has limits of its own: a member of control_group who spends
    // theirs does not spend root's. Tallied as "request", never as the
    // reason: that is the client's text, and could pose as a trigger.
    const TriggerPolicy::Verdict verdict = requests_.Offer(peer.uid, absl::Now());
    if (verdict != TriggerPolicy::Verdict::kFire) {
      tally_.Count(kRequestedSnapshotReason, TriggerTally::Outcome::kSuppressed);
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
                                "), a limit for each user, holds it back; counted in status"));
    }
  }
  std::optional<TraceSummary::Window> boottime_window;
  if (window.has_value()) boottime_window = window->boottime;
  absl::StatusOr<std::string> path = TakeSnapshot(
      RequestedSnapshotFileReason(reason), Who(peer),
      SnapshotTrigger{reason, "ringside snapshot", static_cast<int32_t>(peer.uid), BoottimeNowNs()},
      {}, boottime_window, kRequestedSnapshotReason);
  if (!path.ok()) return Error(absl::StrCat("no snapshot: ", path.status().message()));
  // Whether the window is held is known once the file is written.
  if (request.wait() || window.has_value()) return AnswerOnceWritten(*path, reason, window, later);
  return SnapshotReply(*path, reason);
}

ControlHandler::Answer AgentService::AnswerOnceWritten(const std::string& path,
                                                       const std::string& reason,
                                                       const std::optional<AskedWindow>& window,
                                                       const LaterReply& later) {
  {
    absl::MutexLock lock(&waiters_mu_);
    snapshot_waiters_.emplace(path, SnapshotWaiter{reason, window, later});
  }
  // Done before it was listed: the writer's report passed it by. Asked
  // after listing it, so that one of the two answers it.
  if (std::optional<SnapshotWriter::Result> done = snapshots_->Outcome(path); done.has_value()) {
    AnswerSnapshotWaiters(*done);
  }
  return Answer::Later(
      kSnapshotWaitLimit,
      Error(absl::StrCat("snapshot ", path, ": not written within ",
                         absl::FormatDuration(kSnapshotWaitLimit), "; it may still be")));
}

void AgentService::SnapshotWritten(const SnapshotWriter::Result& r) {
  AnswerSnapshotWaiters(r);
  if (!r.status.ok()) {
    log_.Error(absl::StrCat("snapshot ", r.path, " failed: ", r.status.message()));
    return;
  }
  log_.Notice(absl::StrCat("snapshot written: ", r.path, " (", r.reason, ")"));
  if (!r.sidecar.ok()) {
    log_.Warning(absl::StrCat("snapshot ", r.path,
                              " has no sidecar, so shippers leave it: ", r.sidecar.message()));
  }
}

void AgentService::AnswerSnapshotWaiters(const SnapshotWriter::Result& written) {
  std::vector<SnapshotWaiter> waiters;
  {
    absl::MutexLock lock(&waiters_mu_);
    auto [begin, end] = snapshot_waiters_.equal_range(written.taken_path);
    for (auto it = begin; it != end; ++it) waiters.push_back(std::move(it->second));
    snapshot_waiters_.erase(begin, end);
  }
  for (const SnapshotWaiter& w : waiters) {
    if (!written.status.ok()) {
      w.later.Send(
          Error(absl::StrCat("snapshot ", written.taken_path, ": ", written.status.message())));
      continue;
    }
    control::Reply reply = SnapshotReply(written.path, w.reason);
    const std::optional<SnapshotWriter::Result::Held>& held = written.held;
    if (w.window.has_value() && held.has_value() && held->until_ns && held->realtime_offset_ns) {
      const int64_t offset = *held->realtime_offset_ns;
      auto unix_ns = [offset](uint64_t boot) { return static_cast<int64_t>(boot) + offset; };
      const std::optional<uint64_t> from = held->from_ns;
      const uint64_t until = *held->until_ns;
      const std::string asked = absl::StrCat(FormatRealtime(w.window->first_unix_ns), " .. ",
                                             FormatRealtime(w.window->last_unix_ns));
      if (!from.has_value() || w.window->boottime.last_ns < *from) {
        w.later.Send(Error(absl::StrCat(
            "the ring no longer holds the window ", asked, ": ",
            from.has_value() ? absl::StrCat("it holds ", FormatRealtime(unix_ns(*from)), " .. ",
                                            FormatRealtime(unix_ns(until)), ", in ", written.path)
                             : absl::StrCat("it holds no events (", written.path, ")"))));
        continue;
      }
      control::SnapshotReply* answer = reply.mutable_snapshot();
      answer->set_window_held(held->Holds(w.window->boottime));
      answer->set_held_from_unix_ns(unix_ns(*from));
      answer->set_held_until_unix_ns(unix_ns(until));
    }
    w.later.Send(reply);
  }
}

absl::StatusOr<std::string> AgentService::TakeSnapshot(
    const std::string& reason, const std::string& by, const SnapshotTrigger& trigger,
    const std::vector<SnapshotTrigger>& joined, const std::optional<TraceSummary::Window>& window,
    absl::string_view tally_as) {
  if (stopping_) return absl::FailedPreconditionError("the agent is stopping");
  absl::StatusOr<std::string> path = snapshots_->Take(reason, trigger, joined, window, tally_as);
  if (path.ok()) log_.Info(absl::StrCat("snapshot asked by ", by, " (", reason, "): ", *path));
  return path;
}

control::Reply AgentService::Trigger(const std::string& name, const Peer& peer) {
  absl::MutexLock lock(&mu_);
  const TriggerDispatcher::Fired fired = triggers_.Fire(
      name,
      SnapshotTrigger{name, "ringside trigger", static_cast<int32_t>(peer.uid), BoottimeNowNs()},
      Who(peer));
  switch (fired.kind) {
    case TriggerDispatcher::Fired::kUnknown:
      return Error(absl::StrCat("no trigger named '", name, "' in trigger_config"));
    case TriggerDispatcher::Fired::kSuppressed:
      return Error(absl::StrCat("trigger '", name, "' suppressed: ",
                                TriggerPolicy::VerdictName(fired.verdict), "; counted in status"));
    case TriggerDispatcher::Fired::kQueued:
    case TriggerDispatcher::Fired::kJoined:
      break;
  }
  control::Reply reply;
  control::TriggerReply* answer = reply.mutable_trigger();
  answer->set_joined(fired.kind == TriggerDispatcher::Fired::kJoined);
  if (fired.due.has_value()) {
    answer->set_delay_ms(static_cast<uint64_t>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(*fired.due - absl::Now()))));
  }
  answer->set_output_dir(config_.output_dir());
  return reply;
}

}  // namespace ringside::agent
