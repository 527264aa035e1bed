#include "agent/daemon/snapshot_requests.h"

#include <time.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/control/control_frame.h"
#include "agent/daemon/internal/replies.h"
#include "agent/session/service_packets.h"
#include "agent/snapshots/snapshot_retention.h"
#include "agent/tracefile/trace_inspector.h"

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

SnapshotRequests::SnapshotRequests(Options options, const config::TraceConfig& config)
    : log_(*options.log),
      tally_(*options.tally),
      options_(std::move(options)),
      limits_(TriggerPolicy::RequestRuleFrom(config, kRequestedSnapshotReason)),
      cooldown_ms_(config.snapshot_request_cooldown_ms()),
      per_hour_(config.max_snapshot_requests_per_hour()) {}

void SnapshotRequests::ReplaceLimits(const config::TraceConfig& config) {
  absl::MutexLock lock(&mu_);
  limits_.Replace(TriggerPolicy::RequestRuleFrom(config, kRequestedSnapshotReason));
  cooldown_ms_ = config.snapshot_request_cooldown_ms();
  per_hour_ = config.max_snapshot_requests_per_hour();
}

uint64_t SnapshotRequests::suppressed() const {
  absl::MutexLock lock(&mu_);
  return limits_.counts().suppressed;
}

absl::StatusOr<SnapshotRequests::AskedWindow> SnapshotRequests::WindowOf(
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

absl::StatusOr<std::optional<SnapshotRequests::AskedWindow>> SnapshotRequests::CheckWindow(
    const control::SnapshotRequest& request) const {
  if (!request.has_around_unix_ns()) return std::nullopt;
  absl::StatusOr<AskedWindow> window = WindowOf(request);
  if (!window.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("no snapshot: ", window.status().message()));
  }
  // Over before the agent started: no file would hold any of it, so none
  // is written (a fan-out must not push useful snapshots out).
  const int64_t start = options_.start_boottime_ns;
  if (static_cast<int64_t>(window->boottime.last_ns) < start) {
    const int64_t offset = RealtimeNowNs() - BoottimeNowNs();
    return absl::OutOfRangeError(absl::StrCat(
        "the ring no longer holds the window ", FormatRealtime(window->first_unix_ns), " .. ",
        FormatRealtime(window->last_unix_ns), ": it ended before this agent started recording, at ",
        FormatRealtime(start + offset)));
  }
  return *window;
}

absl::Status SnapshotRequests::Admit(const Peer& peer, const std::string& reason) {
  TriggerPolicy::Verdict verdict;
  uint32_t cooldown_ms, per_hour;
  {
    absl::MutexLock lock(&mu_);
    // Each uid has limits of its own: a member of control_group who spends
    // theirs does not spend root's.
    verdict = limits_.Offer(peer.uid, absl::Now());
    cooldown_ms = cooldown_ms_;
    per_hour = per_hour_;
  }
  if (verdict == TriggerPolicy::Verdict::kFire) return absl::OkStatus();
  // Tallied as "request", never as the reason: that is the client's text,
  // and could pose as a trigger.
  tally_.Count(kRequestedSnapshotReason, TriggerTally::Outcome::kSuppressed);
  const bool cooldown = verdict == TriggerPolicy::Verdict::kCooldown;
  const char* field = cooldown ? "snapshot_request_cooldown_ms" : "max_snapshot_requests_per_hour";
  log_.LogLimited(
      LogLevel::kInfo, "snapshot request",
      absl::StrCat("snapshot asked by ", Who(peer), " (", reason, ") suppressed by ", field));
  return absl::ResourceExhaustedError(
      absl::StrCat("snapshot request suppressed: the agent's ", field, " (",
                   cooldown ? absl::StrCat(cooldown_ms, " ms") : absl::StrCat(per_hour),
                   "), a limit for each user, holds it back; counted in status"));
}

ControlHandler::Answer SnapshotRequests::Handle(const control::SnapshotRequest& request,
                                                const Peer& peer, const LaterReply& later) {
  const std::string reason = request.reason().empty() ? kRequestedSnapshotReason : request.reason();
  if (!IsUtf8(reason)) return Error("the snapshot reason is not UTF-8 text");
  if (reason.size() > kMaxSnapshotReasonBytes) {
    return Error(absl::StrCat("the snapshot reason is ", reason.size(), " bytes; at most ",
                              kMaxSnapshotReasonBytes));
  }
  // A request refused for its window is refused before the limits see it:
  // it must not spend the requester's cooldown.
  absl::StatusOr<std::optional<AskedWindow>> window = CheckWindow(request);
  if (!window.ok()) return Error(std::string(window.status().message()));
  if (absl::Status admitted = Admit(peer, reason); !admitted.ok()) {
    return Error(std::string(admitted.message()));
  }
  std::optional<TraceSummary::Window> boottime_window;
  if (window->has_value()) boottime_window = (*window)->boottime;
  absl::StatusOr<std::string> path = options_.take(
      RequestedSnapshotFileReason(reason), Who(peer),
      SnapshotTrigger{reason, "ringside snapshot", static_cast<int32_t>(peer.uid), BoottimeNowNs()},
      boottime_window);
  if (!path.ok()) return Error(absl::StrCat("no snapshot: ", path.status().message()));
  // Whether the window is held is known once the file is written.
  if (request.wait() || window->has_value()) {
    return AnswerOnceWritten(*path, reason, *window, later);
  }
  return SnapshotReply(*path, reason);
}

ControlHandler::Answer SnapshotRequests::AnswerOnceWritten(const std::string& path,
                                                           const std::string& reason,
                                                           const std::optional<AskedWindow>& window,
                                                           const LaterReply& later) {
  {
    absl::MutexLock lock(&mu_);
    waiters_.emplace(path, Waiter{reason, window, later});
  }
  // Done before it was listed: the writer's report passed it by. Asked
  // after listing it, so that one of the two answers it.
  if (std::optional<SnapshotWriter::Result> done = options_.outcome(path); done.has_value()) {
    AnswerWaiters(*done);
  }
  return ControlHandler::Answer::Later(
      kSnapshotWaitLimit,
      Error(absl::StrCat("snapshot ", path, ": not written within ",
                         absl::FormatDuration(kSnapshotWaitLimit), "; it may still be")));
}

void SnapshotRequests::AnswerWaiters(const SnapshotWriter::Result& written) {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto [begin, end] = waiters_.equal_range(written.taken_path);
    for (auto it = begin; it != end; ++it) waiters.push_back(std::move(it->second));
    waiters_.erase(begin, end);
  }
  for (const Waiter& w : waiters) w.later.Send(ReplyTo(w, written));
}

control::Reply SnapshotRequests::ReplyTo(const Waiter& w, const SnapshotWriter::Result& written) {
  if (!written.status.ok()) {
    return Error(absl::StrCat("snapshot ", written.taken_path, ": ", written.status.message()));
  }
  control::Reply reply = SnapshotReply(written.path, w.reason);
  const std::optional<SnapshotWriter::Result::Held>& held = written.held;
  if (!w.window.has_value() || !held.has_value() || !held->until_ns || !held->realtime_offset_ns) {
    return reply;
  }
  const int64_t offset = *held->realtime_offset_ns;
  auto unix_ns = [offset](uint64_t boot) { return static_cast<int64_t>(boot) + offset; };
  const std::optional<uint64_t> from = held->from_ns;
  const uint64_t until = *held->until_ns;
  if (!from.has_value() || w.window->boottime.last_ns < *from) {
    return Error(absl::StrCat(
        "the ring no longer holds the window ", FormatRealtime(w.window->first_unix_ns), " .. ",
        FormatRealtime(w.window->last_unix_ns), ": ",
        from.has_value() ? absl::StrCat("it holds ", FormatRealtime(unix_ns(*from)), " .. ",
                                        FormatRealtime(unix_ns(until)), ", in ", written.path)
                         : absl::StrCat("it holds no events (", written.path, ")")));
  }
  control::SnapshotReply* answer = reply.mutable_snapshot();
  answer->set_window_held(held->Holds(w.window->boottime));
  answer->set_held_from_unix_ns(unix_ns(*from));
  answer->set_held_until_unix_ns(unix_ns(until));
  return reply;
}

}  // namespace ringside::agent
