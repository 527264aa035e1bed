#include "agent/cli/inspect_command.h"

#include <cstdio>

#include "agent/files/trace_inspector.h"

namespace ringside::agent {

const CommandSpec& InspectCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "inspect",
      .synopsis = "ringside inspect [--json] FILE",
      .summary =
          "Summarizes any Perfetto-format trace: packets by type and by sequence, losses\n"
          "(previous_packet_dropped marks and every non-zero stat), the time range, and\n"
          "the processes and threads named. Streams the file, so large traces are fine;\n"
          "a truncated or corrupt file is summarized up to the bad byte, then an error\n"
          "names its offset (exit 1).",
      .flags = {{0, "json", "", "print the summary as one JSON object", false}},
      .examples =
          "  ringside inspect trace.pftrace\n"
          "  ringside inspect --json trace.pftrace | jq .packets_by_type\n",
      .max_positional = 1,
      .rest_is_command = false,
  };
  return *spec;
}

int RunInspectCommand(const ParsedArgs& args) {
  if (args.positional.size() != 1) return UsageError(InspectCommandSpec(), "needs a FILE");
  const std::string& path = args.positional[0];
  absl::StatusOr<TraceSummary> summary = InspectTraceFile(path);
  if (!summary.ok()) {
    std::fprintf(stderr, "ringside inspect: %s\n", std::string(summary.status().message()).c_str());
    return kExitUsage;
  }
  if (args.Has("json")) {
    std::printf("%s\n", SummaryToJsonText(path, *summary).c_str());
  } else {
    std::fputs(SummaryToText(path, *summary).c_str(), stdout);
  }
  std::fflush(stdout);
  if (summary->error) {
    std::fprintf(stderr, "ringside inspect: %s: byte offset %llu: %s\n", path.c_str(),
                 static_cast<unsigned long long>(summary->error->offset),
                 summary->error->message.c_str());
    return kExitFailure;
  }
  if (summary->packets == 0) {
    std::fprintf(stderr, "ringside inspect: %s: the file is empty: it holds no trace packets\n",
                 path.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace ringside::agent
