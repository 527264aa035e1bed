#include "agent/daemon/agent_service.h"

#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_limits.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/control/control_frame.h"
#include "agent/daemon/agent_stream.h"
#include "agent/daemon/dead_agent_cleanup.h"
#include "agent/daemon/internal/replies.h"
#include "agent/lifecycle/open_file_limit.h"
#include "agent/lifecycle/privileges.h"
#include "agent/output/output_dir.h"
#include "agent/output/output_file.h"
#include "agent/session/session_snapshot.h"
#include "agent/snapshots/snapshot_retention.h"
#include "agent/tracefile/packet_compression.h"
#include "base/version.h"

namespace ringside::agent {
namespace {

// A start step slower than this is logged as soon as it ends.
constexpr absl::Duration kSlowStartStep = absl::Seconds(2);

// The open-file limit raised (agent/lifecycle/open_file_limit.h), and said
// when its hard limit keeps it under what the agent asks for.
void RaiseOpenFiles(AgentLog* log) {
  if (const rlim_t n = RaiseOpenFileLimit(); n < kAgentOpenFiles) {
    log->Info(absl::StrCat("open files: at most ", n, " (the hard limit); linux.process_stats ",
                           "keeps the statm of ", n / 4, " processes open"));
  }
}

// The start's steps, timed one after another.
class StartTimes {
 public:
  explicit StartTimes(AgentLog* log) : log_(log) {}
  // The step that ends now, since the previous one ended.
  void Step(const char* what) {
    const absl::Time now = absl::Now();
    const absl::Duration took = now - last_;
    last_ = now;
    absl::StrAppend(&steps_, steps_.empty() ? "" : ", ", what, " ", FormatSeconds(took));
    if (took > kSlowStartStep) {
      log_->Info(absl::StrCat("slow start: ", what, " took ", FormatSeconds(took)));
    }
  }
  std::string Summary() const {
    return absl::StrCat("started in ", FormatSeconds(last_ - start_), " (", steps_, ")");
  }

 private:
  static std::string FormatSeconds(absl::Duration d) {
    return absl::StrFormat("%.2fs", absl::ToDoubleSeconds(d));
  }
  AgentLog* log_;
  const absl::Time start_ = absl::Now();
  absl::Time last_ = start_;
  std::string steps_;
};

// Whether a linux.bpf source records user stacks (bpf_config.stacks).
bool RecordsUserStacks(const config::TraceConfig& config) {
  for (const auto& ds : config.data_sources()) {
    const config::DataSourceConfig& c = ds.config();
    if (c.name() == "linux.bpf" && c.bpf_config().has_stacks() &&
        c.bpf_config().stacks().blocked() && c.bpf_config().stacks().user()) {
      return true;
    }
  }
  return false;
}

// The tally's rows no request can take (TriggerTally::Reserve): the
// config's triggers, requests', SIGUSR1's and the previous boot's.
std::vector<std::string> ReservedTallyNames(const config::TraceConfig& config) {
  std::vector<std::string> names = {kRequestedSnapshotReason, kSignalSnapshotReason,
                                    kPreviousBootTrigger};
  for (const auto& t : config.trigger_config().triggers()) names.push_back(t.name());
  return names;
}

// Start()'s first step: the control and output groups resolved (into
// `control_options` and `*output_group`); errors name the config field.
absl::Status ResolveGroups(const config::TraceConfig& config,
                           ControlServer::Options* control_options,
                           std::optional<gid_t>* output_group) {
  if (config.has_control_group()) {
    absl::StatusOr<gid_t> gid = ResolveGroup("control_group", config.control_group());
    if (!gid.ok()) return gid.status();
    control_options->group = *gid;
  }
  if (config.has_output_group()) {
    absl::StatusOr<gid_t> gid = ResolveGroup("output_group", config.output_group());
    if (!gid.ok()) return gid.status();
    *output_group = *gid;
  }
  return absl::OkStatus();
}

}  // namespace

using internal::Error;
using internal::Who;

AgentService::AgentService(Options options)
    : options_(std::move(options)), log_(*options_.log), notifier_(*options_.notifier) {}

AgentService::~AgentService() {
  metrics_.Stop();
  // Waiters for queued snapshots get their answers before the socket goes.
  if (control_ != nullptr) control_->StopAccepting();
  if (snapshots_ != nullptr) snapshots_->Finish();
  if (control_ != nullptr) control_->Stop();
  if (session_ != nullptr) (void)session_->Stop();
}

absl::Status AgentService::CheckConfig(const config::TraceConfig& cfg) {
  if (cfg.has_trigger_config() &&
      cfg.trigger_config().trigger_mode() != config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT &&
      cfg.trigger_config().trigger_mode() != config::TraceConfig::TriggerConfig::UNSPECIFIED) {
    return absl::UnimplementedError(absl::StrCat(
        "trigger_config.trigger_mode ",
        config::TraceConfig::TriggerConfig::TriggerMode_Name(cfg.trigger_config().trigger_mode()),
        ": the agent records until stopped and takes CLONE_SNAPSHOTs; use CLONE_SNAPSHOT"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AgentService>> AgentService::Start(Options options) {
  if (absl::Status st = CheckConfig(options.config); !st.ok()) return st;
  std::unique_ptr<AgentService> s(new AgentService(std::move(options)));
  // How long each step of the start took, logged once READY (and at once
  // for a step slower than kSlowStartStep, so that a start that never gets
  // there still says how far it came): a start that took a minute on a
  // loaded test machine once, with no trace of where.
  StartTimes times(&s->log_);
  s->ReplaceTriggers(s->options_.config);
  const config::TraceConfig& config = s->options_.config;
  ControlServer::Options control_options;
  if (absl::Status st = ResolveGroups(config, &control_options, &s->output_group_); !st.ok()) {
    return st;
  }
  s->reloader_ = std::make_unique<ConfigReloader>(
      ConfigReloader::Options{.config_path = s->options_.config_path,
                              .overrides = s->options_.overrides,
                              .output_group = s->output_group_,
                              .log = &s->log_,
                              .target = s.get()},
      config);
  if (absl::Status st = OutputDir::Open(config.output_dir(), s->output_group_).status(); !st.ok()) {
    return st;
  }
  times.Step("output directory");
  CleanUpAfterDeadAgents(config, s->log_);
  times.Step("clean-up after dead agents");
  s->boot_ring_.Start(config, s->log_);
  // Before the sources start: an incident they read wakes the main thread.
  s->stop_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  s->wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->stop_fd_ || !s->wake_fd_) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  absl::StatusOr<AgentStream> stream = OpenAgentStreamSink(config, s->output_group_, s->log_);
  if (!stream.ok()) return stream.status();
  s->stream_ = std::move(*stream);
  RaiseOpenFiles(&s->log_);  // Before the sources: process_stats sizes its files by it.
  absl::StatusOr<std::unique_ptr<TracingSession>> session =
      TracingSession::Create(config, &s->kernel_reports_);
  if (!session.ok()) return session.status();
  s->session_ = std::move(*session);
  s->session_->SetAttentionHook([service = s.get()] { service->Wake(); });
  times.Step("sources loaded");
  const absl::Status started = s->stream_.sink != nullptr
                                   ? s->session_->StartIntoFiles(s->stream_.sink)
                                   : s->session_->Start();
  times.Step("sources started");
  for (const std::string& w : s->session_->warnings()) s->log_.Warning(w);
  if (!started.ok()) return started;
  if (!s->session_->incidents_reported()) {
    for (const std::string& w : IncidentTriggerWarnings(config, s->session_->report())) {
      s->log_.Warning(w);
    }
  }
  s->StartSnapshots();
  // Before the privileges go: the kernel takes a window's limits from them.
  s->kernel_triggers_.Start(config, &s->kernel_reports_, &s->kernel_reports_, s->log_);
  s->boot_ring_.QueueSnapshot(s->snapshots_.get(), s->log_);
  if (absl::Status st = s->ListenForControl(std::move(control_options)); !st.ok()) return st;
  times.Step("control socket");
  if (s->options_.drop_capabilities) {
    if (absl::Status st = s->DropCapabilitiesAfterSetup(); !st.ok()) return st;
    times.Step("privileges dropped");
  }
  s->StartMetrics(config);
  s->log_.Info(times.Summary());

  s->log_.Notice(absl::StrCat(
      "ringside agent ", base::kVersion, " recording (",
      s->options_.config_path.empty() ? "embedded default config" : s->options_.config_path,
      "); control socket ", config.control_socket(), "; snapshots into ", config.output_dir(),
      s->stream_.files != nullptr
          ? absl::StrCat("; streaming into ", s->stream_.files->display_name())
          : ""));
  // Every source attached and the socket answering: ready means ready.
  s->notifier_.Ready(s->HealthLine());
  return s;
}

void AgentService::StartSnapshots() {
  const config::TraceConfig& config = options_.config;
  requests_ = std::make_unique<SnapshotRequests>(
      SnapshotRequests::Options{
          .log = &log_,
          .tally = &tally_,
          .start_boottime_ns = session_->start_boottime_ns(),
          .take =
              [this](const std::string& file_reason, const std::string& by,
                     const SnapshotTrigger& trigger,
                     const std::optional<TraceSummary::Window>& window) {
                return TakeSnapshot(file_reason, by, trigger, {}, window, kRequestedSnapshotReason);
              },
          .outcome = [this](const std::string& path) { return snapshots_->Outcome(path); }},
      config);
  snapshots_ = std::make_unique<SnapshotWriter>(
      session_.get(), config.output_dir(),
      [this](const SnapshotWriter::Result& r) { SnapshotWritten(r); }, &tally_);
  snapshots_->set_retention(config.max_snapshot_files(), config.max_snapshot_bytes());
  snapshots_->set_output_group(output_group_);
  snapshots_->set_compression(PacketCompressionOf(config));
  snapshots_->FinishOldSnapshots(/*stream_files=*/!config.write_into_file());
}

absl::Status AgentService::ListenForControl(ControlServer::Options control_options) {
  control_options.replace_stale_socket = options_.replace_stale_socket;
  control_options.log = [this](absl::string_view line) {
    log_.LogLimited(LogLevel::kWarning, "control", line);
  };
  absl::StatusOr<std::unique_ptr<ControlServer>> control =
      ControlServer::Listen(options_.config.control_socket(), control_options, this);
  if (!control.ok()) return control.status();
  control_ = std::move(*control);
  return absl::OkStatus();
}

void AgentService::StartMetrics(const config::TraceConfig& config) {
  std::optional<AgentMetrics::Listener> listener = metrics_.StartListener(config);
  if (listener.has_value()) {
    absl::MutexLock lock(&mu_);
    metrics_listener_ = std::move(listener);
  }
  metrics_.StartTextfile(config);
}

absl::Status AgentService::DropCapabilitiesAfterSetup() {
  CapabilityMask keep = CapabilitiesToKeepHere(output_group_.has_value());
  // Stop() unmounts a tracefs mounted for everyone; that takes CAP_SYS_ADMIN.
  if (session_->mounted_tracefs_for_everyone()) keep |= CapabilityBit(CAP_SYS_ADMIN);
  // User stacks are named from other processes' /proc/PID/maps and their
  // binaries under /proc/PID/root: PTRACE_MODE_READ for another user's.
  if (RecordsUserStacks(options_.config)) keep |= CapabilityBit(CAP_SYS_PTRACE);
  if (absl::Status st = DropCapabilities(keep); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("dropping privileges after setup: ", st.message()));
  }
  log_.Info(absl::StrCat("setup done: capabilities dropped (kept: ", CapabilityNames(keep),
                         "), no_new_privs set"));
  return absl::OkStatus();
}

int AgentService::Run() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&signals, sig);
  base::ScopedFd sfd(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sfd) {
    log_.Error(absl::StrCat("signalfd: ", std::strerror(errno), "; stopping"));
    return 1;
  }
  const std::string why = ServeUntilStopped(sfd.get());
  sfd.reset();
  return Shutdown(why);
}

std::string AgentService::ServeUntilStopped(int signal_fd) {
  const std::optional<absl::Duration> watchdog = notifier_.watchdog_interval();
  absl::Time next_health = absl::Now() + options_.health_period;
  absl::Time next_watchdog = watchdog ? absl::Now() : absl::InfiniteFuture();
  std::string why;
  while (why.empty()) {
    const absl::Time now = absl::Now();
    if (now >= next_watchdog) {
      notifier_.Watchdog();
      next_watchdog = now + *watchdog;
    }
    if (now >= next_health) {
      HealthTick();
      next_health = now + options_.health_period;
    }
    const absl::Time next_mark = boot_ring_.Tick();
    const absl::Time next_snapshot = TakeDueSnapshots();
    // What the session noticed (a full disk under the stream): it wakes
    // this loop through wake_fd_ (its attention hook), so this sleeps
    // until something is due rather than looking every second.
    LogSessionNotices();
    const absl::Duration wait =
        std::min({next_health, next_watchdog, next_snapshot, next_mark}) - absl::Now();
    pollfd fds[3] = {
        {signal_fd, POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    const int n =
        poll(fds, 3,
             static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(wait) + 1, 1, 60'000)));
    if (n <= 0) continue;
    if (fds[2].revents & POLLIN) {
      uint64_t drained;
      (void)!read(wake_fd_.get(), &drained, sizeof(drained));
    }
    if (fds[1].revents & POLLIN) why = "stop requested over the control socket";
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (std::string stop = OnSignal(info); !stop.empty()) why = std::move(stop);
    }
  }
  return why;
}

std::string AgentService::OnSignal(const signalfd_siginfo& info) {
  const std::string from = info.ssi_pid != 0 ? absl::StrCat(" from pid ", info.ssi_pid) : "";
  switch (info.ssi_signo) {
    case SIGTERM:
    case SIGINT:
      return absl::StrCat(strsignal(static_cast<int>(info.ssi_signo)), from);
    case SIGHUP:
      notifier_.Reloading();
      reloader_->Reload();
      notifier_.Ready(HealthLine());
      break;
    case SIGUSR1:
      if (absl::StatusOr<std::string> p =
              TakeSnapshot(kSignalSnapshotReason, absl::StrCat("SIGUSR1", from),
                           SnapshotTrigger{kSignalSnapshotReason, "SIGUSR1",
                                           static_cast<int32_t>(info.ssi_uid), BoottimeNowNs()});
          !p.ok()) {
        log_.Error(absl::StrCat("snapshot (SIGUSR1", from, "): ", p.status().message()));
      }
      break;
  }
  return "";
}

int AgentService::Shutdown(const std::string& why) {
  notifier_.Stopping();
  log_.Notice(absl::StrCat("stopping: ", why));
  // No new requests first: a trigger accepted from here on would be lost.
  // A `snapshot --wait` parked meanwhile stays, and gets its file's path
  // once the writer has written it below.
  control_->StopAccepting();
  metrics_.Stop();
  // Triggers still in their stop_delay_ms: snapshot them now, with the
  // aftermath there is, rather than lose them.
  {
    absl::MutexLock lock(&mu_);
    triggers_.Close();
  }
  TakeDueSnapshots();
  stopping_ = true;
  // Queued snapshots written, their waiters answered; then the session.
  snapshots_->Finish();
  control_->Stop();
  kernel_triggers_.Stop();
  absl::Status stopped = session_->Stop();
  if (stopped.ok() && stream_.files != nullptr) {
    // The last file: the buffers' rest and its trailer, renamed into place.
    absl::StatusOr<TracingSession::Summary> last = session_->WriteTrace(stream_.sink);
    if (!last.ok()) stopped = last.status();
  }
  LogSessionNotices();
  log_.Notice(status_.StoppedLine(session_->progress(), snapshots_->stats(), absl::Now()));
  if (!stopped.ok()) {
    log_.Error(absl::StrCat("stopping the recording: ", stopped.message()));
    return 1;
  }
  return 0;
}

void AgentService::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
}

absl::Time AgentService::TakeDueSnapshots() {
  std::vector<TriggerDispatcher::Due> due;
  absl::Time next;
  {
    absl::MutexLock lock(&mu_);
    due = triggers_.TakeDue(absl::Now(), &next);
  }
  for (const TriggerDispatcher::Due& d : due) {
    const SnapshotTrigger& t = d.trigger;
    if (absl::StatusOr<std::string> p = TakeSnapshot(t.name, "trigger " + t.name, t, d.joined);
        !p.ok()) {
      log_.Error(absl::StrCat("snapshot (trigger ", t.name, "): ", p.status().message()));
    }
  }
  return next;
}

void AgentService::RequestStop() {
  const uint64_t one = 1;
  (void)!write(stop_fd_.get(), &one, sizeof(one));
}

ControlHandler::Answer AgentService::Handle(const control::Request& request, const Peer& peer,
                                            const LaterReply& later) {
  control::Reply reply;
  switch (request.request_case()) {
    case control::Request::kStatus:
      *reply.mutable_status() = BuildStatus();
      return reply;
    case control::Request::kSnapshot:
      return requests_->Handle(request.snapshot(), peer, later);
    case control::Request::kStop:
      log_.Notice(absl::StrCat("stop requested by ", Who(peer)));
      RequestStop();
      reply.mutable_stop();
      return reply;
    case control::Request::kTrigger:
      return Trigger(request.trigger().name(), peer);
    case control::Request::REQUEST_NOT_SET:
      break;
  }
  return Error("an empty request, or one this agent does not know (from a newer ringside?)");
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
  return TriggerReply(name, fired, reloader_->output_dir(), absl::Now());
}

void AgentService::SnapshotWritten(const SnapshotWriter::Result& r) {
  requests_->AnswerWaiters(r);
  boot_ring_.Written(r);
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

void AgentService::SetSnapshotDir(const std::string& dir) { snapshots_->set_output_dir(dir); }

void AgentService::ReplaceTriggers(const config::TraceConfig& config) {
  absl::MutexLock lock(&mu_);
  triggers_.ReplaceTriggers(config);
  tally_.Reserve(ReservedTallyNames(config));
  kernel_triggers_.CheckReload(config, log_);
}

void AgentService::ReplaceRequestLimits(const config::TraceConfig& config) {
  requests_->ReplaceLimits(config);
}

void AgentService::SetRetention(uint32_t max_files, uint64_t max_bytes) {
  snapshots_->set_retention(max_files, max_bytes);
}

void AgentService::LogSessionNotices() {
  for (const std::string& notice : session_->TakeNotices()) log_.Warning(notice);
}

void AgentService::HealthTick() {
  status_.Tick(session_->report(), absl::Now());
  notifier_.Status(HealthLine());
  kernel_triggers_.LogNewWarnings(log_);
}

std::string AgentService::HealthLine() {
  return status_.HealthLine(session_->report(), snapshots_ ? snapshots_->stats().written : 0);
}

control::StatusReply AgentService::BuildStatus() {
  const SnapshotWriter::Stats snaps = snapshots_->stats();
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    suppressed = triggers_.suppressed();
  }
  AgentStatus::Triggers triggers;
  triggers.configured = reloader_->trigger_names();
  suppressed += requests_->suppressed() + snaps.joined;
  triggers.counts = tally_.counts();
  const TracingSession::Report report = session_->report();
  control::StatusReply reply =
      status_.Reply(report, absl::Now(), options_.config_path, snaps, suppressed, triggers);
  *reply.mutable_reload() = reloader_->status();
  boot_ring_.FillStatus(&reply);
  kernel_triggers_.FillStatus(&reply);
  {
    absl::MutexLock lock(&mu_);
    if (metrics_listener_.has_value()) AgentMetrics::FillStatus(*metrics_listener_, &reply);
  }
  if (stream_.files != nullptr) {
    FillStreamingStatus(*stream_.files, stream_.compression.get(), report,
                        reply.mutable_streaming());
  }
  return reply;
}

}  // namespace ringside::agent
