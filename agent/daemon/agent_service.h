#ifndef RINGSIDE_AGENT_DAEMON_AGENT_SERVICE_H_
#define RINGSIDE_AGENT_DAEMON_AGENT_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/control/control_server.h"
#include "agent/daemon/agent_metrics.h"
#include "agent/daemon/agent_status.h"
#include "agent/daemon/agent_stream.h"
#include "agent/daemon/boot_recording.h"
#include "agent/daemon/config_reloader.h"
#include "agent/daemon/kernel_triggers.h"
#include "agent/daemon/snapshot_requests.h"
#include "agent/daemon/trigger_dispatcher.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/lifecycle/systemd_notifier.h"
#include "agent/session/tracing_session.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/snapshots/trigger_tally.h"
#include "agent/sources/incident.h"
#include "base/scoped_fd.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

struct signalfd_siginfo;

namespace ringside::agent {

// `ringside agent`: one tracing session started once and kept running,
// with the control socket in front of it and snapshots written beside it.
//
//   main thread:     Run(): signals (SIGTERM/SIGINT stop, SIGHUP reload,
//                    SIGUSR1 snapshot), the watchdog, the health line
//   control thread:  Handle(): status, snapshot, stop, trigger; never waits
//                    for a file (`snapshot --wait` is answered from the
//                    snapshot thread), but a snapshot request's clone of
//                    the buffers runs on it
//   snapshot thread: SnapshotWriter, one file at a time
//   the session's own threads (sources, buffer owner, the streaming drain)
//
// Shutdown, in order: the control socket closes to new requests, queued
// snapshots are written (a `snapshot --wait` still parked gets its file's
// path), the socket's last connections close, the session stops (sources
// detached, tracefs instance removed).
class AgentService : public ControlHandler, private ConfigReloader::Target {
 public:
  struct Options {
    // The config file; empty when running on the embedded default.
    std::string config_path;
    // The effective config (ApplyDefaults and ApplyAgentDefaults done).
    config::TraceConfig config;
    // Settings given on the command line (--socket, --output-dir): merged
    // over every config loaded, reloads included.
    config::TraceConfig overrides;
    // The control socket may replace a dead agent's socket file.
    bool replace_stale_socket = false;
    AgentLog* log = nullptr;              // Required; outlives the service.
    SystemdNotifier* notifier = nullptr;  // Required; outlives the service.
    // How often the health line (log and systemd STATUS=) is refreshed and
    // events/s measured.
    absl::Duration health_period = absl::Seconds(10);
    // Once every source is attached and the socket listens, lower every
    // thread to the capabilities recording still needs (privileges.h) and
    // set no_new_privs. `ringside agent` does; tests that run the service
    // inside their own process do not.
    bool drop_capabilities = false;
  };

  // What only the agent refuses in a config ParseConfig accepts: a
  // trigger_mode it does not act on. kUnimplemented naming the field and
  // what to use. `ringside agent` asks before it takes its lock, so that a
  // refused config starts nothing; Start() asks again.
  static absl::Status CheckConfig(const config::TraceConfig& config);

  // Loads and starts the session, creates output_dir and the control
  // socket. The caller has blocked SIGTERM, SIGINT, SIGHUP and SIGUSR1 in
  // every thread (before this call, so the service's threads inherit it).
  // Errors name what could not be done (a source that failed does not fail
  // the agent: it is logged and shown in status).
  static absl::StatusOr<std::unique_ptr<AgentService>> Start(Options options);
  ~AgentService() override;

  // Serves until SIGTERM, SIGINT or a stop request, then shuts down in
  // order. Returns the exit status: 0 after a clean stop.
  int Run();

  Answer Handle(const control::Request& request, const Peer& peer,
                const LaterReply& later) override;

 private:
  explicit AgentService(Options options);
  // Start()'s steps. Once the session records: the snapshot requests and the writer, with
  // the config's retention, group and compression.
  void StartSnapshots();
  absl::Status ListenForControl(ControlServer::Options control_options);
  // Run()'s parts: the loop until a stop (returns why it stopped), one
  // signal read from `signal_fd` (returns why to stop, or ""), and the
  // shutdown in order (returns the exit status).
  std::string ServeUntilStopped(int signal_fd);
  std::string OnSignal(const signalfd_siginfo& info);
  int Shutdown(const std::string& why);
  control::StatusReply BuildStatus();
  // The writer's report of a file written or failed, on its thread: answers
  // the waiters, logs.
  void SnapshotWritten(const SnapshotWriter::Result& r);
  // A named trigger: the policy decides; a fire takes a snapshot after the
  // trigger's stop_delay_ms, on the main thread.
  control::Reply Trigger(const std::string& name, const Peer& peer);
  // Takes a snapshot; logs it.
  // `trigger` goes into the file (clone_snapshot_trigger); `by` into the log;
  // `joined`: the triggers that joined it while it waited for its delay;
  // `window`, `tally_as`: as SnapshotWriter::Take's.
  absl::StatusOr<std::string> TakeSnapshot(
      const std::string& reason, const std::string& by, const SnapshotTrigger& trigger,
      const std::vector<SnapshotTrigger>& joined = {},
      const std::optional<TraceSummary::Window>& window = std::nullopt,
      absl::string_view tally_as = {});
  // ConfigReloader::Target: what a reload (SIGHUP) changes live.
  void SetSnapshotDir(const std::string& dir) override;
  // The triggers, and their rows in the tally (TriggerTally::Reserve); how
  // Start() gives them the config's too.
  void ReplaceTriggers(const config::TraceConfig& config) override;
  void ReplaceRequestLimits(const config::TraceConfig& config) override;
  void SetRetention(uint32_t max_files, uint64_t max_bytes) override;
  absl::Status DropCapabilitiesAfterSetup();
  // Measures events/s; refreshes the health line.
  void HealthTick();
  // Logs what the session had to say (a full disk under the stream, and
  // when it is writing again).
  void LogSessionNotices();
  std::string HealthLine();
  void RequestStop();
  // metrics_textfile, metrics_listen: starts writing and serving the
  // metrics (a failure is logged, and the agent records on).
  void StartMetrics(const config::TraceConfig& config);
  // Takes the snapshots whose trigger's stop_delay_ms has passed; returns
  // when the next one is due.
  absl::Time TakeDueSnapshots();
  void Wake();

  Options options_;
  AgentLog& log_;
  SystemdNotifier& notifier_;
  const absl::Time started_ = absl::Now();
  AgentStatus status_{started_};
  // Before the session and the writer, which count into it.
  TriggerTally tally_;
  // write_into_file: the files the session streams into, and their
  // compression (empty without). Declared before the session, which writes
  // into it until it is destroyed.
  AgentStream stream_;
  std::unique_ptr<TracingSession> session_;
  // The kernel's persistent ftrace instance, recorded into while the agent
  // runs. Started once by Start().
  BootRing boot_ring_;
  // The snapshots asked for over the control socket; before the writer,
  // which reports into it until it is finished. Set by Start() once the
  // session recorded.
  std::unique_ptr<SnapshotRequests> requests_;
  std::unique_ptr<SnapshotWriter> snapshots_;
  std::unique_ptr<ControlServer> control_;
  base::ScopedFd stop_fd_;  // eventfd: a stop request from the control thread.
  // eventfd: a delayed snapshot was queued, or the session has a notice
  // (its attention hook).
  base::ScopedFd wake_fd_;
  std::atomic<bool> stopping_{false};
  // output_group resolved at start (a change needs a restart).
  std::optional<gid_t> output_group_;

  // The running config and its reloads (SIGHUP). Set by Start() once the
  // groups are resolved, before anything asks for status.
  std::unique_ptr<ConfigReloader> reloader_;

  absl::Mutex mu_;
  // The config's triggers, fired by requests and incidents, until their
  // snapshots are due.
  TriggerDispatcher triggers_ ABSL_GUARDED_BY(mu_){&tally_, &log_, [this] { Wake(); }};
  // metrics_listen's state as the start left it (absent: not set), with
  // the listener's counters, which outlive it.
  std::optional<AgentMetrics::Listener> metrics_listener_ ABSL_GUARDED_BY(mu_);
  // What the kernel reports fires triggers_: incidents (a source's reader
  // thread), pressure and events (the threads of kernel_triggers_, which
  // are declared after it and stopped in Shutdown()).
  KernelReports kernel_reports_{&mu_, &triggers_};
  KernelTriggers kernel_triggers_;
  // metrics_textfile, metrics_listen: their threads read the status
  // (BuildStatus()), so they are declared last and stopped first
  // (Shutdown(), the destructor).
  AgentMetrics metrics_{&log_, [this] { return BuildStatus(); }};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_AGENT_SERVICE_H_
