#include "agent/cli/stop_command.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/cli/agent_client.h"
#include "agent/control/control_client.h"

namespace ringside::agent {
namespace {

// The agent answers a stop before it starts stopping.
constexpr absl::Duration kRequestTimeout = absl::Seconds(10);
// Finishing every file and detaching every program takes seconds, not
// minutes, unless something is stuck.
constexpr absl::Duration kDefaultWaitTimeout = absl::Seconds(30);
constexpr absl::Duration kPollPeriod = absl::Milliseconds(100);

// Whether the agent with `pid` has gone from `socket_path`: nobody listens
// there any more, or another agent (one that started since) answers.
bool Gone(const std::string& socket_path, int32_t pid, absl::Duration timeout) {
  control::Request request;
  request.mutable_status();
  absl::StatusOr<control::Reply> reply = CallAgent(socket_path, request, timeout);
  if (!reply.ok()) {
    // A connection closed while the agent stops, or a slow answer, is an
    // agent still there; only an absent listener means it is gone.
    return reply.status().code() == absl::StatusCode::kUnavailable &&
           absl::StartsWith(reply.status().message(), "no ringside agent");
  }
  return reply->has_status() && reply->status().pid() != pid;
}

// The agent `pid` still runs: it closes its socket first and then finishes
// its files, so --wait waits for the process too. A pid that is not a
// ringside (another PID namespace's numbering) is not waited for, nor one
// that has exited and waits for its parent (a zombie).
bool StillRunning(int32_t pid) {
  if (pid <= 0) return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  // "pid (comm) state ...": comm may hold spaces and parentheses.
  const size_t close = stat.rfind(')');
  return absl::StrContains(stat, " (ringside) ") && close != std::string::npos &&
         close + 2 < stat.size() && stat[close + 2] != 'Z';
}

}  // namespace

const CommandSpec& StopCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "stop",
        .synopsis = "ringside stop [--wait] [--timeout D] [--socket PATH] [-c CONFIG]",
        .summary =
            "Asks the running `ringside agent` to shut down as SIGTERM does: it finishes\n"
            "every file and detaches from the kernel, then exits. Returns as soon as the\n"
            "agent has taken the request; with --wait, once the agent no longer answers\n"
            "on its socket (exit 1 if it still does after the timeout).",
        .flags =
            {
                {0, "wait", "", "return once the agent has stopped", false},
                {0, "timeout", "D",
                 "with --wait: give up after D (10s, 2m; plain: seconds); default 30s", false},
            },
        .examples =
            "  ringside stop\n"
            "  ringside stop --wait && ringside agent -c new.pbtxt   # switch configs\n",
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

int RunStopCommand(const ParsedArgs& args) {
  const CommandSpec& spec = StopCommandSpec();
  const bool wait = args.Has("wait");
  absl::Duration wait_timeout = kDefaultWaitTimeout;
  if (args.Has("timeout")) {
    if (!wait) return UsageError(spec, "--timeout goes with --wait");
    absl::StatusOr<absl::Duration> t = ParseDurationFlag("--timeout", args.Get("timeout"));
    if (!t.ok()) return UsageError(spec, std::string(t.status().message()));
    wait_timeout = *t;
  }
  std::string note;
  absl::StatusOr<std::string> socket_path = ResolveControlSocket(args, &note);
  if (!socket_path.ok()) {
    std::fprintf(stderr, "ringside stop: %s\n",
                 std::string(socket_path.status().message()).c_str());
    return kExitUsage;
  }
  if (!note.empty()) std::fprintf(stderr, "ringside stop: note: %s\n", note.c_str());

  int exit_code = kExitOk;
  // Which agent is to stop, so that --wait is not fooled by a successor
  // (systemd restarting it) answering on the same socket.
  int32_t pid = 0;
  if (wait) {
    control::Request status;
    status.mutable_status();
    std::optional<control::Reply> reply = AskAgent(
        spec.name, *socket_path, status, control::Reply::kStatus, kRequestTimeout, &exit_code);
    if (!reply) return exit_code;
    pid = reply->status().pid();
  }
  control::Request request;
  request.mutable_stop();
  if (!AskAgent(spec.name, *socket_path, request, control::Reply::kStop, kRequestTimeout,
                &exit_code)) {
    return exit_code;
  }
  std::printf("the agent on %s is stopping\n", socket_path->c_str());
  std::fflush(stdout);
  if (!wait) return kExitOk;

  const absl::Time deadline = absl::Now() + wait_timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    if (Gone(*socket_path, pid, std::min(left, absl::Seconds(1))) && !StillRunning(pid)) {
      std::printf("the agent on %s has stopped\n", socket_path->c_str());
      return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
    }
    absl::SleepFor(std::min(kPollPeriod, deadline - absl::Now()));
  }
  std::fprintf(stderr, "ringside stop: the agent on %s still answers after %s\n",
               socket_path->c_str(), absl::FormatDuration(wait_timeout).c_str());
  return kExitFailure;
}

}  // namespace ringside::agent
