#include "agent/cli/inspect_command.h"

#include <cstdio>

#include "agent/files/json_text.h"
#include "agent/files/trace_inspector.h"
#include "nlohmann/json.hpp"

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
          "names its offset (exit 1). FILE may be gzip'd (known by its magic bytes); -\n"
          "reads the trace from standard input.",
      .flags = {{0, "json", "", "print the summary as one JSON object", false}},
      .examples =
          "  ringside inspect trace.pftrace\n"
          "  ringside inspect --json trace.pftrace | jq .packets_by_type\n"
          "  ringside inspect trace.pftrace.gz\n"
          "  ssh host cat trace.pftrace | ringside inspect -\n",
      .max_positional = 1,
      .rest_is_command = false,
  };
  return *spec;
}

int RunInspectCommand(const ParsedArgs& args) {
  if (args.positional.size() != 1) return UsageError(InspectCommandSpec(), "needs a FILE");
  const std::string& path = args.positional[0];
  const bool json = args.Has("json");
  absl::StatusOr<TraceSummary> summary = InspectTraceFile(path);
  if (!summary.ok()) {
    const std::string message(summary.status().message());
    // A script reading --json looks at "error", so it says why here too.
    if (json) {
      nlohmann::json j = {{"file", path}, {"error", {{"offset", nullptr}, {"message", message}}}};
      std::printf("%s\n", JsonText(j).c_str());
      std::fflush(stdout);
    }
    std::fprintf(stderr, "ringside inspect: %s\n", message.c_str());
    return kExitUsage;
  }
  // An empty file reads cleanly but is no trace: it fails like a corrupt one,
  // and the summary carries the reason so that --json says it.
  const bool empty = !summary->error && summary->packets == 0;
  if (empty) {
    summary->error = TraceSummary::Error{0, "the file is empty: it holds no trace packets"};
  }
  if (json) {
    std::printf("%s\n", SummaryToJsonText(path, *summary).c_str());
  } else {
    std::fputs(SummaryToText(path, *summary).c_str(), stdout);
  }
  std::fflush(stdout);
  if (empty) {
    std::fprintf(stderr, "ringside inspect: %s: %s\n", path.c_str(),
                 summary->error->message.c_str());
    return kExitFailure;
  }
  if (summary->error) {
    std::fprintf(stderr, "ringside inspect: %s: byte offset %llu: %s\n", path.c_str(),
                 static_cast<unsigned long long>(summary->error->offset),
                 summary->error->message.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace ringside::agent
