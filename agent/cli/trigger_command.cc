#include "agent/cli/trigger_command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/cli/agent_client.h"
#include "agent/config/config_loader.h"
#include "agent/control/control_frame.h"

namespace ringside::agent {
namespace {

// The agent only queues the snapshot: the answer is immediate.
constexpr absl::Duration kTimeout = absl::Seconds(10);

}  // namespace

const CommandSpec& TriggerCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "trigger",
        .synopsis = "ringside trigger NAME [--socket PATH] [-c CONFIG]",
        .summary =
            "Fires the trigger NAME of the running `ringside agent`'s trigger_config: the\n"
            "agent writes a snapshot after the trigger's stop_delay_ms, within its cooldown\n"
            "and rate limits, and names the trigger in the file (clone_snapshot_trigger).\n"
            "A trigger fired while its snapshot is pending joins that snapshot. An unknown\n"
            "name, or one held back by a limit, is refused with the agent's reason (exit 1);\n"
            "`ringside status` counts what was held back. Prints whether it fired or\n"
            "joined a pending snapshot, when that snapshot is taken and where it goes.",
        .flags = {},
        .examples =
            "  ringside trigger deploy            # a deploy tool marks its rollout\n"
            "  ringside trigger slow_request || true\n",
        .max_positional = 1,
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

int RunTriggerCommand(const ParsedArgs& args) {
  const CommandSpec& spec = TriggerCommandSpec();
  if (args.positional.empty()) return UsageError(spec, "the trigger's NAME is missing");
  const std::string& name = args.positional[0];
  if (!IsUtf8(name)) return UsageError(spec, "the trigger's name is not UTF-8 text");
  if (name.empty() || name.size() > kMaxTriggerNameBytes) {
    return UsageError(spec, absl::StrCat("a trigger's name is 1 to ", kMaxTriggerNameBytes,
                                         " bytes; this one is ", name.size()));
  }
  control::Request request;
  request.mutable_trigger()->set_name(name);
  int exit_code = kExitOk;
  std::optional<control::Reply> reply =
      AskAgent(spec, args, request, control::Reply::kTrigger, kTimeout, &exit_code);
  if (!reply) return exit_code;
  // What happened, for the tool or person that fired it.
  const control::TriggerReply& t = reply->trigger();
  std::printf("trigger %s %s: a snapshot in %s, into %s\n", name.c_str(),
              t.joined() ? "joined the snapshot already pending" : "fired",
              absl::FormatDuration(absl::Milliseconds(t.delay_ms())).c_str(),
              t.output_dir().c_str());
  return kExitOk;
}

}  // namespace ringside::agent
