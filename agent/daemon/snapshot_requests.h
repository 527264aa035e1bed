#ifndef RINGSIDE_AGENT_DAEMON_SNAPSHOT_REQUESTS_H_
#define RINGSIDE_AGENT_DAEMON_SNAPSHOT_REQUESTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/control/control_server.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/session/tracing_session.h"
#include "agent/snapshots/request_limits.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/snapshots/trigger_tally.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The snapshots asked for over the control socket (`ringside snapshot`):
// the request checked (its reason, the window --around asks for), held to
// the config's limits for its requester (RequestLimits), taken, and with
// --wait or --around answered once the writer reports its file written,
// through the connection's LaterReply, so that the control thread never
// waits for a file.
//
//   control thread:  Handle() ──► limits ──► take ──► reply now, or park
//                                                     the LaterReply by path
//   writer thread:   AnswerWaiters(result) ──► the parked replies of that path
//
// Thread-safe: the control thread asks, the snapshot writer's thread
// reports, the main thread replaces the limits on a reload. Its mutex is a
// leaf: the tally and the log are told after it is let go.
class SnapshotRequests {
 public:
  // Takes the snapshot: `file_reason` goes into the file's name, `by`
  // into the log, `trigger` into the file, `window` is the one --around
  // asked the file to hold. Returns the path SnapshotWriter::Take() named.
  using Take = std::function<absl::StatusOr<std::string>(
      const std::string& file_reason, const std::string& by, const SnapshotTrigger& trigger,
      const std::optional<TraceSummary::Window>& window)>;
  // The writer's outcome for the path Take() returned, once known
  // (SnapshotWriter::Outcome()).
  using Outcome = std::function<std::optional<SnapshotWriter::Result>(const std::string& path)>;

  struct Options {
    AgentLog* log = nullptr;        // Required; outlives this.
    TriggerTally* tally = nullptr;  // Required; outlives this.
    // When the session started recording, on the trace's clock: a window
    // over before it gets no file.
    int64_t start_boottime_ns = 0;
    Take take;
    Outcome outcome;
  };
  // `config`: the limits (snapshot_request_cooldown_ms,
  // max_snapshot_requests_per_hour).
  SnapshotRequests(Options options, const config::TraceConfig& config);

  // New limits (a reload that changed them); both sets keep their history.
  void ReplaceLimits(const config::TraceConfig& config);

  // The answer to `request` from `peer`: an error, the file's path now,
  // or (--wait, --around) later through `later`, once the writer reports
  // the file or kSnapshotWaitLimit passed.
  ControlHandler::Answer Handle(const control::SnapshotRequest& request, const Peer& peer,
                                const LaterReply& later);

  // The writer's report of the file Take() named `written.taken_path`:
  // the requests waiting for it get their reply.
  void AnswerWaiters(const SnapshotWriter::Result& written);

  // Requests the limits held back.
  uint64_t suppressed() const;

  // An --around request's window: on the trace's clock (what the file is
  // asked to hold), and on the wall clock as the requester gave it (what
  // replies show: converted back, it would be some microseconds off).
  struct AskedWindow {
    TraceSummary::Window boottime;
    int64_t first_unix_ns = 0;
    int64_t last_unix_ns = 0;
  };
  // The window `request` asks for (--around), or why not (kInvalidArgument:
  // longer than kMaxSnapshotWindow, not over yet, out of range).
  static absl::StatusOr<AskedWindow> WindowOf(const control::SnapshotRequest& request);

 private:
  struct Waiter {
    std::string reason;
    std::optional<AskedWindow> window;
    LaterReply later;
  };
  // The window --around asks for, or the error reply that refuses it.
  absl::StatusOr<std::optional<AskedWindow>> CheckWindow(
      const control::SnapshotRequest& request) const;
  // OK when `peer`'s limits let a request through (recorded as a fire);
  // else the refusal, counted in the tally and logged.
  absl::Status Admit(const Peer& peer, const std::string& reason);
  // Parks `later` until the writer reports `path`.
  ControlHandler::Answer AnswerOnceWritten(const std::string& path, const std::string& reason,
                                           const std::optional<AskedWindow>& window,
                                           const LaterReply& later);
  // The reply to one waiter of `written`.
  static control::Reply ReplyTo(const Waiter& waiter, const SnapshotWriter::Result& written);

  AgentLog& log_;
  TriggerTally& tally_;
  const Options options_;

  mutable absl::Mutex mu_;
  RequestLimits limits_ ABSL_GUARDED_BY(mu_);
  // The config's values of the limits, for the refusal's message.
  uint32_t cooldown_ms_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t per_hour_ ABSL_GUARDED_BY(mu_) = 0;
  // `snapshot --wait` requests waiting for their file, by the path Take()
  // returned. At most one per control connection.
  std::multimap<std::string, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_SNAPSHOT_REQUESTS_H_
