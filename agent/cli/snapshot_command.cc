#include "agent/cli/snapshot_command.h"

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/cli/agent_client.h"
#include "agent/control/control_frame.h"
#include "agent/tracefile/trace_inspector.h"

namespace ringside::agent {
namespace {

// Starting a snapshot only clones the buffers; writing a large one out can
// take minutes on a slow disk.
constexpr absl::Duration kStartTimeout = absl::Seconds(10);
constexpr absl::Duration kWaitTimeout = absl::Minutes(5);
// --around waits for its window's end at most this long.
constexpr absl::Duration kMaxWaitForWindow = absl::Minutes(10);

}  // namespace

absl::StatusOr<absl::Time> ParseMoment(const std::string& text) {
  absl::Time t;
  std::string err;
  // RFC 3339 (5.6) lets a space stand for the 'T', as GNU `date
  // --rfc-3339=seconds` writes it: "2026-11-27 10:15:00+00:00".
  std::string rfc3339 = text;
  if (rfc3339.size() > 10 && rfc3339[10] == ' ') rfc3339[10] = 'T';
  if (absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) return t;
  // Unix seconds, with up to nine decimals.
  const std::vector<std::string> parts = absl::StrSplit(text, '.');
  int64_t seconds = 0;
  if (parts.size() <= 2 && !parts[0].empty() &&
      parts[0].find_first_not_of("0123456789") == std::string::npos &&
      absl::SimpleAtoi(parts[0], &seconds)) {
    int64_t nanos = 0;
    if (parts.size() == 2) {
      const std::string& frac = parts[1];
      if (frac.empty() || frac.size() > 9 ||
          frac.find_first_not_of("0123456789") != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--around ", text, ": seconds take one to nine decimals (1795806492.25)"));
      }
      (void)absl::SimpleAtoi(frac + std::string(9 - frac.size(), '0'), &nanos);
    }
    return absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--around ", text,
                   ": not a time: give RFC 3339 (2026-11-27T10:15:00Z, "
                   "2026-11-27 11:15:00.5+01:00) or Unix seconds (1795806492)"));
}

const CommandSpec& SnapshotCommandSpec() {
  static const CommandSpec* spec = [] {
    auto* s = new CommandSpec{
        .name = "snapshot",
        .synopsis =
            "ringside snapshot [--reason TEXT] [--wait] [--timeout D]\n"
            "                         [--around TIME [--window D]]\n"
            "                         [--socket PATH] [-c CONFIG]",
        .summary =
            "Asks the running `ringside agent` to snapshot its ring buffers and durable\n"
            "store into a trace file in its output_dir, as SIGUSR1 does, and prints that\n"
            "file's path (only the path, on stdout). Without --wait the agent answers as\n"
            "soon as the snapshot has started: the file appears at that path, complete,\n"
            "once written (it is written under a temporary name, then renamed). With\n"
            "--wait it answers once the file is in place.\n"
            "\n"
            "With --around, the snapshot is asked to hold the window of --window (30s)\n"
            "around TIME, a moment on the wall clock (REALTIME) that another node saw:\n"
            "it waits for the window's end when that is still to come, then returns once\n"
            "the file is in place, saying on stderr when the ring held only part of the\n"
            "window; a window the ring no longer holds at all is an error naming what it\n"
            "holds. The file lists the window, and `ringside inspect` says whether it\n"
            "holds it whole.",
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
                {0, "around", "TIME",
                 "the moment to hold: RFC 3339 (2026-11-27T10:15:00Z, or `date "
                 "--rfc-3339=seconds`'s 2026-11-27 10:15:00+00:00) or Unix seconds; "
                 "implies --wait",
                 false},
                {0, "window", "D",
                 absl::StrCat("with --around, the span to hold, TIME in its middle (30s; at most ",
                              absl::FormatDuration(kMaxSnapshotWindow), ")"),
                 false},
            },
        .examples =
            "  ringside snapshot --reason 'latency spike'\n"
            "  ringside inspect \"$(ringside snapshot --wait)\"   # once it is written\n"
            "  ringside snapshot --around 2026-11-27T10:15:00Z --window 1m\n",
    };
    for (FlagSpec& f : AgentSocketFlags()) s->flags.push_back(std::move(f));
    return s;
  }();
  return *spec;
}

namespace {

// --window: the span to hold around --around's moment. nullopt, or the
// exit status of a usage error.
std::optional<int> ParseWindowFlag(const CommandSpec& spec, const ParsedArgs& args,
                                   absl::Duration* window) {
  *window = kDefaultSnapshotWindow;
  if (!args.Has("window")) return std::nullopt;
  absl::StatusOr<absl::Duration> w = ParseDurationFlag("--window", args.Get("window"));
  if (!w.ok()) return UsageError(spec, std::string(w.status().message()));
  if (*w <= absl::ZeroDuration()) return UsageError(spec, "--window must be longer than 0");
  if (*w > kMaxSnapshotWindow) {
    return UsageError(spec, absl::StrCat("--window ", args.Get("window"), ": at most ",
                                         absl::FormatDuration(kMaxSnapshotWindow),
                                         " (a ring holds minutes to hours)"));
  }
  *window = *w;
  return std::nullopt;
}

// --around: asks `snapshot` for the window around the moment, once the
// window has ended (waiting for it here when it is still to come). nullopt,
// or the exit status when the command ends here.
std::optional<int> AskForWindow(const CommandSpec& spec, const ParsedArgs& args,
                                control::SnapshotRequest* snapshot) {
  absl::StatusOr<absl::Time> moment = ParseMoment(args.Get("around"));
  if (!moment.ok()) return UsageError(spec, std::string(moment.status().message()));
  absl::Duration window;
  if (auto status = ParseWindowFlag(spec, args, &window)) return status;
  // The window must have ended before the agent can hold it.
  const absl::Duration to_end = (*moment + window / 2) - absl::Now();
  if (to_end > kMaxWaitForWindow) {
    return UsageError(spec, absl::StrCat("--around ", args.Get("around"), ": the window ends ",
                                         absl::FormatDuration(to_end), " from now; at most ",
                                         absl::FormatDuration(kMaxWaitForWindow)));
  }
  if (to_end > absl::ZeroDuration()) {
    // Before waiting minutes for the window: is there an agent to ask,
    // and does it let us ask?
    control::Request probe;
    probe.mutable_status();
    int probe_exit = kExitOk;
    if (!AskAgent(spec, args, probe, control::Reply::kStatus, kStartTimeout, &probe_exit)) {
      return probe_exit;
    }
    std::fprintf(stderr, "ringside snapshot: waiting %s for the window to end\n",
                 absl::FormatDuration(to_end).c_str());
    absl::SleepFor(to_end);
  }
  snapshot->set_around_unix_ns(absl::ToUnixNanos(*moment));
  snapshot->set_window_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(window)));
  return std::nullopt;
}

// Says on stderr when the snapshot holds only part of the window asked
// for, or when the agent could not tell.
void WarnOfWindowHeld(const control::SnapshotReply& answer, bool around) {
  if (answer.has_window_held() && !answer.window_held()) {
    std::fprintf(stderr,
                 "ringside snapshot: the ring held only part of the window: it holds %s .. %s\n",
                 FormatRealtime(answer.held_from_unix_ns()).c_str(),
                 FormatRealtime(answer.held_until_unix_ns()).c_str());
  } else if (around && !answer.has_window_held()) {
    std::fprintf(stderr,
                 "ringside snapshot: the agent could not read the file back to tell whether it "
                 "holds the window whole\n");
  }
}

}  // namespace

int RunSnapshotCommand(const ParsedArgs& args) {
  const CommandSpec& spec = SnapshotCommandSpec();
  // A snapshot of a moment says so in its name unless told otherwise.
  const std::string reason =
      args.Has("around") && !args.Has("reason") ? "around" : args.Get("reason");
  if (!IsUtf8(reason)) return UsageError(spec, "--reason is not UTF-8 text");
  if (reason.size() > kMaxSnapshotReasonBytes) {
    return UsageError(spec, absl::StrCat("--reason is ", reason.size(), " bytes long; at most ",
                                         kMaxSnapshotReasonBytes));
  }
  const bool around = args.Has("around");
  if (args.Has("window") && !around) return UsageError(spec, "--window needs --around");
  const bool wait = args.Has("wait") || around;
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
  if (around) {
    if (auto status = AskForWindow(spec, args, snapshot)) return *status;
  }
  int exit_code = kExitOk;
  std::optional<control::Reply> reply =
      AskAgent(spec, args, request, control::Reply::kSnapshot, timeout, &exit_code);
  if (!reply) return exit_code;
  if (reply->snapshot().path().empty()) {
    std::fprintf(stderr, "ringside snapshot: the agent answered without a snapshot path\n");
    return kExitFailure;
  }
  WarnOfWindowHeld(reply->snapshot(), around);
  std::printf("%s\n", reply->snapshot().path().c_str());
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace ringside::agent
