#include "agent/cli/status_command.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "agent/cli/agent_client.h"
#include "agent/cli/status_format.h"
#include "agent/control/control_client.h"
#include "agent/metrics/prometheus_text.h"

namespace ringside::agent {
namespace {

// An agent answers status from counters it keeps: anything slower is stuck.
constexpr absl::Duration kStatusTimeout = absl::Seconds(10);
// An agent listens once every source is attached: seconds on a big
// machine, unless something is stuck.
constexpr absl::Duration kDefaultWaitTimeout = absl::Seconds(30);
constexpr absl::Duration kPollPeriod = absl::Milliseconds(100);

// Waits until something listens on `socket_path` (an agent that has
// started), or `timeout` passes; the caller then asks it as usual, which
// reports whatever is still wrong.
void WaitForListener(const std::string& socket_path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  control::Request request;
  request.mutable_status();
  while (absl::Now() < deadline) {
    absl::StatusOr<control::Reply> reply = CallAgent(socket_path, request, kStatusTimeout);
    if (reply.ok() || reply.status().code() != absl::StatusCode::kUnavailable ||
        !absl::StartsWith(reply.status().message(), "no ringside agent") ||
        absl::StrContains(reply.status().message(), "not a socket")) {
      return;
    }
    absl::SleepFor(kPollPeriod);
  }
}

}  // namespace

const CommandSpec& StatusCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "status",
        .synopsis =
            "ringside status [--json | --prometheus] [--wait [--timeout D]] [--socket PATH] "
            "[-c CONFIG]",
        .summary =
            "Asks the running `ringside agent` what it is doing: its uptime, config and own\n"
            "cost (CPU, memory); each data source's state, event rate and losses by cause\n"
            "and CPU; each ring buffer's fill, bytes written and overwritten; the durable\n"
            "store; the snapshots taken; the file it streams into. With --json, one JSON\n"
            "object whose fields docs/status.md describes (schema_version 1; fields are\n"
            "only ever added). With --prometheus, the same counts as Prometheus metrics\n"
            "(docs/metrics.md), one scrape. Exit 1 when no agent answers. With --wait, an agent "
            "that\n"
            "is still starting is waited for: it answers once every source is attached,\n"
            "so `ringside agent & ringside status --wait` returns when it records.",
        .flags =
            {
                {0, "json", "", "print the status as one JSON object", false},
                {0, "prometheus", "", "print the status as Prometheus metrics (text format)",
                 false},
                {0, "wait", "", "wait for an agent to answer (one still starting)", false},
                {0, "timeout", "D",
                 "with --wait: give up after D (10s, 2m; plain: seconds); default 30s", false},
            },
        .examples =
            "  ringside status\n"
            "  ringside status --json | jq '.sources[] | {name, state, events}'\n"
            "  ringside status --prometheus | grep ^ringside_events_lost_total\n"
            "  ringside status -c /etc/ringside/agent.pbtxt   # the socket that config names\n"
            "  ringside agent & ringside status --wait --timeout 1m\n",
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

int RunStatusCommand(const ParsedArgs& args) {
  const CommandSpec& spec = StatusCommandSpec();
  if (args.Has("json") && args.Has("prometheus")) {
    return UsageError(spec, "--json and --prometheus: one format at a time");
  }
  if (args.Has("timeout") && !args.Has("wait")) {
    return UsageError(spec, "--timeout goes with --wait");
  }
  if (args.Has("wait")) {
    absl::Duration timeout = kDefaultWaitTimeout;
    if (args.Has("timeout")) {
      absl::StatusOr<absl::Duration> t = ParseDurationFlag("--timeout", args.Get("timeout"));
      if (!t.ok()) return UsageError(spec, std::string(t.status().message()));
      timeout = *t;
    }
    // A socket that cannot be resolved is reported by AskAgent below.
    if (absl::StatusOr<std::string> socket_path = ResolveControlSocket(args); socket_path.ok()) {
      WaitForListener(*socket_path, timeout);
    }
  }
  control::Request request;
  request.mutable_status();
  int exit_code = kExitOk;
  std::optional<control::Reply> reply =
      AskAgent(spec, args, request, control::Reply::kStatus, kStatusTimeout, &exit_code);
  if (!reply) return exit_code;
  if (args.Has("json")) {
    std::printf("%s\n", StatusJson(reply->status()).c_str());
  } else if (args.Has("prometheus")) {
    std::fputs(
        PrometheusText(reply->status(), MetricsOptions{.kernel = RunningKernelRelease()}).c_str(),
        stdout);
  } else {
    std::fputs(StatusText(reply->status()).c_str(), stdout);
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace ringside::agent
