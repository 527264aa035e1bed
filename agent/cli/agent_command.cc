#include "agent/cli/agent_command.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/control/control_client.h"
#include "agent/daemon/agent_service.h"
#include "agent/lifecycle/agent_lock.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/lifecycle/systemd_notifier.h"

namespace ringside::agent {
namespace {

// Is an agent answering on `socket`? Decides whether a socket file left
// there is a dead agent's (replaced) or a live one's (we refuse to start).
bool SomeoneAnswers(const std::string& socket) {
  control::Request request;
  request.mutable_status();
  absl::StatusOr<control::Reply> reply = CallAgent(socket, request, absl::Seconds(2));
  return reply.ok() || reply.status().code() == absl::StatusCode::kDeadlineExceeded;
}

// The config the agent runs: the file -c names (else the embedded one),
// with the flags' settings (`*overrides`) merged in and the agent's
// defaults, checked. nullopt, or the exit status when it cannot run.
std::optional<int> LoadAgentConfig(const CommandSpec& spec, const ParsedArgs& args,
                                   config::TraceConfig* config, config::TraceConfig* overrides) {
  const std::string config_path = args.Get("config");
  if (config_path.empty()) {
    *config = DefaultAgentConfig();
  } else {
    absl::StatusOr<config::TraceConfig> loaded = LoadConfigFile(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "ringside agent: %s\n", std::string(loaded.status().message()).c_str());
      return kExitUsage;
    }
    *config = *loaded;
  }
  if (args.Has("socket")) overrides->set_control_socket(args.Get("socket"));
  if (args.Has("output-dir")) overrides->set_output_dir(args.Get("output-dir"));
  if (args.Has("machine-name")) overrides->set_machine_name(args.Get("machine-name"));
  if (args.Has("metrics-listen")) overrides->set_metrics_listen(args.Get("metrics-listen"));
  config->MergeFrom(*overrides);
  ApplyAgentDefaults(config);
  if (absl::Status s = ValidateConfig(*config, config_path.empty() ? "flags" : config_path);
      !s.ok()) {
    return UsageError(spec, std::string(s.message()));
  }
  if (absl::Status s = AgentService::CheckConfig(*config); !s.ok()) {
    std::fprintf(stderr, "ringside agent: %s: %s\n",
                 config_path.empty() ? "flags" : config_path.c_str(),
                 std::string(s.message()).c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

// We hold the lock, so no agent of this run dir owns a socket there; but
// one with another run dir might. Sets `*replace_stale_socket` when a dead
// agent's socket is there. nullopt, or the exit status when a live agent
// answers on it.
std::optional<int> CheckSocketIsFree(const std::string& socket, const AgentLock& lock,
                                     AgentLog* log, bool* replace_stale_socket) {
  *replace_stale_socket = false;
  if (access(socket.c_str(), F_OK) != 0) return std::nullopt;
  if (SomeoneAnswers(socket)) {
    log->Error(absl::StrCat("an agent already answers on ", socket,
                            " (started with another --run-dir?); not starting a second one"));
    return kExitFailure;
  }
  *replace_stale_socket = true;
  if (lock.stale_holder().has_value()) {
    log->Notice(absl::StrCat("the agent of pid ", lock.stale_holder()->pid,
                             " ended without cleaning up; replacing its socket"));
  }
  return std::nullopt;
}

// -c as `status` shows it and SIGHUP reads it again: absolute, whatever the
// directory it was typed in (the agent's own stays where it started, but
// a reader of `status` is elsewhere).
std::string AbsoluteConfigPath(const std::string& config_path) {
  if (!config_path.empty() && config_path[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      return absl::StrCat(cwd, std::string_view(cwd).back() == '/' ? "" : "/", config_path);
    }
  }
  return config_path;
}

// Starts the agent's service and runs it until it stops. Returns the exit
// status.
int RunService(AgentService::Options options, AgentLog* log) {
  absl::StatusOr<std::unique_ptr<AgentService>> service = AgentService::Start(std::move(options));
  if (!service.ok()) {
    log->Error(absl::StrCat("not started: ", service.status().message()));
    // A config the agent cannot run is the user's to fix, as a usage error.
    const absl::StatusCode code = service.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented
               ? kExitUsage
               : kExitFailure;
  }
  return (*service)->Run();
}

}  // namespace

const CommandSpec& AgentCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "agent",
      .synopsis = "ringside agent [-c CONFIG] [--socket PATH] [--output-dir DIR] [--run-dir DIR]",
      .summary =
          "Runs the node agent: records this machine continuously into its buffers (a flight\n"
          "recorder) until SIGTERM or `ringside stop`, and writes a snapshot of them into\n"
          "output_dir when asked (`ringside snapshot`, SIGUSR1). `ringside status` shows what\n"
          "it records and loses. SIGHUP reloads the config (settings that need a restart are\n"
          "named and keep their value). One agent per machine: the lock file is\n"
          "RUN_DIR/agent.lock. With systemd (Type=notify) it reports readiness once every\n"
          "source is attached, and its health. Logs go to stderr (journald levels under\n"
          "systemd). Needs root (CAP_BPF, CAP_PERFMON, tracefs) for kernel events.",
      .flags =
          {
              {'c', "config", "FILE",
               "config in protobuf text format (docs/config.md); default: the embedded flight "
               "recorder (record's default events into a 64 MiB ring, until stopped)",
               false},
              {0, "socket", "PATH",
               "control socket; default: the config's control_socket, else " +
                   std::string(kDefaultControlSocket),
               false},
              {0, "output-dir", "DIR",
               "where snapshots go; default: the config's output_dir, else " +
                   std::string(kDefaultOutputDir),
               false},
              {0, "run-dir", "DIR",
               "directory of the lock file; default: " + std::string(kDefaultRunDir), false},
              {0, "machine-name", "NAME",
               "the name (and so the id) this machine's files give it; default: the "
               "config's machine_name, else the host name (a DaemonSet passes its node's)",
               false},
              {0, "metrics-listen", "ADDR",
               "serve Prometheus metrics on http://ADDR/metrics (0.0.0.0:9464, :9464); "
               "default: the config's metrics_listen, else none (docs/metrics.md)",
               false},
          },
      .examples =
          "  ringside agent                              # the embedded flight recorder\n"
          "  ringside agent -c /etc/ringside/agent.pbtxt\n"
          "  ringside snapshot --reason 'slow deploy' --wait   # from another shell\n",
      .max_positional = 0,
  };
  return *spec;
}

int RunAgentCommand(const ParsedArgs& args) {
  const CommandSpec& spec = AgentCommandSpec();
  config::TraceConfig config;
  config::TraceConfig overrides;
  if (auto status = LoadAgentConfig(spec, args, &config, &overrides)) return *status;
  const std::string run_dir = args.Get("run-dir", kDefaultRunDir);
  if (run_dir.empty() || run_dir[0] != '/') {
    return UsageError(spec, absl::StrCat("--run-dir ", run_dir, ": an absolute path"));
  }

  // A snapshot allocates a buffer's worth at once. glibc would raise its
  // mmap threshold after freeing such a block and serve the next ones from
  // heaps it keeps: a fixed threshold returns them to the system, so the
  // agent's memory stays at its buffers plus a constant over months.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  AgentLog log;
  absl::StatusOr<std::unique_ptr<AgentLock>> lock =
      AgentLock::Acquire(run_dir, config.control_socket());
  if (!lock.ok()) {
    log.Error(lock.status().message());
    return kExitFailure;
  }
  bool replace_stale_socket = false;
  if (auto status =
          CheckSocketIsFree(config.control_socket(), **lock, &log, &replace_stale_socket)) {
    return *status;
  }

  // Taken synchronously by AgentService::Run(); blocked before any thread
  // starts, so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();
  AgentService::Options options;
  options.config_path = AbsoluteConfigPath(args.Get("config"));
  options.config = config;
  options.overrides = overrides;
  options.replace_stale_socket = replace_stale_socket;
  options.log = &log;
  options.notifier = &notifier;
  options.drop_capabilities = true;
  return RunService(std::move(options), &log);
}

}  // namespace ringside::agent
