#include "agent/cli/status_command.h"

#include <cstdio>

#include "agent/cli/agent_client.h"
#include "agent/cli/status_format.h"

namespace ringside::agent {
namespace {

// An agent answers status from counters it keeps: anything slower is stuck.
constexpr absl::Duration kStatusTimeout = absl::Seconds(10);

}  // namespace

const CommandSpec& StatusCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "status",
        .synopsis = "ringside status [--json] [--socket PATH] [-c CONFIG]",
        .summary =
            "Asks the running `ringside agent` what it is doing: its uptime, config and own\n"
            "cost (CPU, memory); each data source's state, event rate and losses by cause\n"
            "and CPU; each ring buffer's fill, bytes written and overwritten; the durable\n"
            "store; the snapshots taken; the file it streams into. With --json, one JSON\n"
            "object whose fields docs/status.md describes (schema_version 1; fields are\n"
            "only ever added). Exit 1 when no agent answers.",
        .flags = {{0, "json", "", "print the status as one JSON object", false}},
        .examples =
            "  ringside status\n"
            "  ringside status --json | jq '.sources[] | {name, state, events}'\n"
            "  ringside status -c /etc/ringside/agent.pbtxt   # the socket that config names\n",
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

int RunStatusCommand(const ParsedArgs& args) {
  control::Request request;
  request.mutable_status();
  int exit_code = kExitOk;
  std::optional<control::Reply> reply = AskAgent(
      StatusCommandSpec(), args, request, control::Reply::kStatus, kStatusTimeout, &exit_code);
  if (!reply) return exit_code;
  if (args.Has("json")) {
    std::printf("%s\n", StatusJson(reply->status()).c_str());
  } else {
    std::fputs(StatusText(reply->status()).c_str(), stdout);
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace ringside::agent
