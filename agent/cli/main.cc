// ringside: one binary, one subcommand per job.

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "agent/cli/agent_command.h"
#include "agent/cli/command_line.h"
#include "agent/cli/inspect_command.h"
#include "agent/cli/list_command.h"
#include "agent/cli/merge_command.h"
#include "agent/cli/record_command.h"
#include "agent/cli/snapshot_command.h"
#include "agent/cli/status_command.h"
#include "agent/cli/stop_command.h"
#include "agent/cli/trigger_command.h"
#include "base/version.h"
#include "google/protobuf/stubs/logging.h"

namespace {

using ringside::agent::CommandSpec;
using ringside::agent::ParsedArgs;

struct Command {
  const CommandSpec& (*spec)();
  int (*run)(const ParsedArgs&);
};

const Command kCommands[] = {
    {ringside::agent::RecordCommandSpec, ringside::agent::RunRecordCommand},
    {ringside::agent::InspectCommandSpec, ringside::agent::RunInspectCommand},
    {ringside::agent::MergeCommandSpec, ringside::agent::RunMergeCommand},
    {ringside::agent::ListCommandSpec, ringside::agent::RunListCommand},
    {ringside::agent::AgentCommandSpec, ringside::agent::RunAgentCommand},
    {ringside::agent::StatusCommandSpec, ringside::agent::RunStatusCommand},
    {ringside::agent::SnapshotCommandSpec, ringside::agent::RunSnapshotCommand},
    {ringside::agent::StopCommandSpec, ringside::agent::RunStopCommand},
    {ringside::agent::TriggerCommandSpec, ringside::agent::RunTriggerCommand},
};

constexpr char kUsage[] =
    "usage: ringside COMMAND [flags] [args]\n"
    "\n"
    "Records what the Linux kernel does (scheduling, processes, any ftrace event) into\n"
    "Perfetto traces: open them in https://ui.perfetto.dev or trace_processor.\n"
    "\n"
    "Commands:\n"
    "  record    record this machine (for a duration, or while a command runs)\n"
    "  inspect   summarize a trace file: packets, losses, time range, processes\n"
    "  merge     put files of several machines into one TAR: one timeline in Perfetto\n"
    "  list      list the events that can be recorded\n"
    "  agent     run the node agent: a flight recorder that writes snapshots when asked\n"
    "            or when something goes wrong (an OOM kill, a crash)\n"
    "  status    what a running agent is doing: sources, buffers, losses, snapshots\n"
    "  snapshot  ask a running agent to write its buffers into a trace file now\n"
    "  stop      ask a running agent to shut down\n"
    "  trigger   fire a named trigger of a running agent (a snapshot after its delay)\n"
    "  help CMD  the flags and examples of a command (also: ringside CMD --help)\n"
    "\n"
    "Exit status: 0 done; 1 it ran and failed; 2 bad arguments or config.\n"
    "ringside --version prints the version.\n";

// `help` is no Command (it runs none), but it has a usage of its own.
const CommandSpec& HelpCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "help",
      .synopsis = "ringside help [COMMAND]",
      .summary =
          "Prints the list of commands, or the flags and examples of COMMAND\n"
          "(the same as 'ringside COMMAND --help').",
      .flags = {},
      .examples =
          "  ringside help\n"
          "  ringside help record\n",
      .max_positional = 1,
      .rest_is_command = false,
  };
  return *spec;
}

// " did you mean 'record'?" for a command name one or two typos away from
// `typed`; empty if none is.
std::string DidYouMean(const std::string& typed) {
  std::vector<std::string> names = {"help", "version"};
  for (const Command& c : kCommands) names.push_back(c.spec().name);
  const std::string closest = ringside::agent::ClosestName(typed, names);
  return closest.empty() ? "" : "; did you mean '" + closest + "'?";
}

const Command* Find(const std::string& name) {
  for (const Command& c : kCommands) {
    if (c.spec().name == name) return &c;
  }
  return nullptr;
}

// Trace strings are the bytes programs chose (argv, comm cut at 15 bytes
// mid-character), UTF-8 or not, as in Perfetto's own traces. libprotobuf
// logs an ERROR for each such string it serializes or parses; for us that
// is not an error. Everything else it says still reaches stderr.
void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (absl::StrContains(message, "invalid UTF-8")) return;
  static constexpr const char* kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s\n",
               level >= 0 && level <= 3 ? kLevels[level] : "?", file, line, message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  google::protobuf::SetLogHandler(ProtobufLog);
  // Debian's Abseil checks every Mutex acquisition against a graph of the
  // lock order seen so far (it is built without NDEBUG): on the readers'
  // path, for each batch. The tests keep the check (their own main); the
  // shipped binary does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A reader that goes away (`ringside ... | head`) makes writes fail with
  // EPIPE, which each writer handles, instead of killing the recorder
  // before it finishes its file.
  signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return ringside::agent::kExitUsage;
  }
  const std::string& name = args[0];
  if (name == "-h" || name == "--help" || (name == "help" && args.size() == 1)) {
    std::fputs(kUsage, stdout);
    return ringside::agent::kExitOk;
  }
  if (name == "--version" || name == "version") {
    std::printf("ringside %s\n", ringside::base::kVersion);
    return ringside::agent::kExitOk;
  }
  if (name == "help") {
    if (args.size() == 2 && (args[1] == "help" || args[1] == "-h" || args[1] == "--help")) {
      std::fputs(ringside::agent::UsageText(HelpCommandSpec()).c_str(), stdout);
      return ringside::agent::kExitOk;
    }
    const Command* c = Find(args[1]);
    if (c == nullptr || args.size() > 2) {
      const std::string hint = c == nullptr ? DidYouMean(args[1]) : "";
      std::fprintf(stderr, "ringside help: no command '%s'%s\n", args[1].c_str(), hint.c_str());
      if (hint.empty()) std::fprintf(stderr, "\n%s", kUsage);
      return ringside::agent::kExitUsage;
    }
    std::fputs(ringside::agent::UsageText(c->spec()).c_str(), stdout);
    return ringside::agent::kExitOk;
  }
  const Command* c = Find(name);
  if (c == nullptr) {
    // A typo gets the name it was probably meant to be, not the whole usage.
    const std::string hint = DidYouMean(name);
    std::fprintf(stderr, "ringside: unknown command '%s'%s\n", name.c_str(), hint.c_str());
    if (hint.empty()) {
      std::fprintf(stderr, "\n%s", kUsage);
    } else {
      std::fputs("See 'ringside --help'.\n", stderr);
    }
    return ringside::agent::kExitUsage;
  }
  absl::StatusOr<ParsedArgs> parsed =
      ringside::agent::ParseArgs(c->spec(), std::vector<std::string>(args.begin() + 1, args.end()));
  if (!parsed.ok()) {
    return ringside::agent::UsageError(c->spec(), std::string(parsed.status().message()));
  }
  if (parsed->help) {
    std::fputs(ringside::agent::UsageText(c->spec()).c_str(), stdout);
    return ringside::agent::kExitOk;
  }
  return c->run(*parsed);
}
