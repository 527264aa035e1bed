#include "agent/cli/snapshot_command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "agent/cli/agent_client.h"
#include "agent/control/control_frame.h"

namespace ringside::agent {
namespace {

// Starting a snapshot only clones the buffers; writing a large one out can
// take minutes on a slow disk.
constexpr absl::Duration kStartTimeout = absl::Seconds(10);
constexpr absl::Duration kWaitTimeout = absl::Minutes(5);

}  // namespace

const CommandSpec& SnapshotCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "snapshot",
        .synopsis =
            "ringside snapshot [--reason TEXT] [--wait] [--timeout D]\n"
            "                         [--socket PATH] [-c CONFIG]",
        .summary =
            "Asks the running `ringside agent` to snapshot its ring buffers and durable\n"
            "store into a trace file in its output_dir, as SIGUSR1 does, and prints that\n"
            "file's path (only the path, on stdout). Without --wait the agent answers as\n"
            "soon as the snapshot has started: the file appears at that path, complete,\n"
            "once written (it is written under a temporary name, then renamed). With\n"
            "--wait it answers once the file is in place.",
        .flags =
            {
                {0, "reason", "TEXT",
                 absl::StrCat("why, recorded in the snapshot and shown by `ringside status` ",
                              "(UTF-8, at most ", kMaxSnapshotReasonBytes,
                              " bytes; default: \"request\")"),
                 false},
                {0, "wait", "", "return once the file is written and in place", false},
                {0, "timeout", "D",
                 "give up after D (10s, 2m; plain: seconds); default 10s, with --wait 5m", false},
            },
        .examples =
            "  ringside snapshot --reason 'latency spike'\n"
            "  ringside inspect \"$(ringside snapshot --wait)\"   # once it is written\n",
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

int RunSnapshotCommand(const ParsedArgs& args) {
  const CommandSpec& spec = SnapshotCommandSpec();
  const std::string reason = args.Get("reason");
  if (!IsUtf8(reason)) return UsageError(spec, "--reason is not UTF-8 text");
  if (reason.size() > kMaxSnapshotReasonBytes) {
    return UsageError(spec, absl::StrCat("--reason is ", reason.size(), " bytes long; at most ",
                                         kMaxSnapshotReasonBytes));
  }
  const bool wait = args.Has("wait");
  absl::Duration timeout = wait ? kWaitTimeout : kStartTimeout;
  if (args.Has("timeout")) {
    absl::StatusOr<absl::Duration> t = ParseDurationFlag("--timeout", args.Get("timeout"));
    if (!t.ok()) return UsageError(spec, std::string(t.status().message()));
    timeout = *t;
  }

  control::Request request;
  control::SnapshotRequest* snapshot = request.mutable_snapshot();
  if (!reason.empty()) snapshot->set_reason(reason);
  snapshot->set_wait(wait);
  int exit_code = kExitOk;
  std::optional<control::Reply> reply =
      AskAgent(spec, args, request, control::Reply::kSnapshot, timeout, &exit_code);
  if (!reply) return exit_code;
  if (reply->snapshot().path().empty()) {
    std::fprintf(stderr, "ringside snapshot: the agent answered without a snapshot path\n");
    return kExitFailure;
  }
  std::printf("%s\n", reply->snapshot().path().c_str());
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace ringside::agent
