#include "agent/inspect_command.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "agent/trace_inspector.h"

ABSL_FLAG(bool, json, false, "inspect: print the summary as one JSON object");

namespace ringside::agent {

int RunInspectCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: ringside inspect [--json] FILE\n");
    return 2;
  }
  const std::string& path = args[0];
  absl::StatusOr<TraceSummary> summary = InspectTraceFile(path);
  if (!summary.ok()) {
    std::fprintf(stderr, "ringside inspect: %s\n", std::string(summary.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", SummaryToJsonText(path, *summary).c_str());
  } else {
    std::fputs(SummaryToText(path, *summary).c_str(), stdout);
  }
  std::fflush(stdout);
  if (summary->error) {
    std::fprintf(stderr, "ringside inspect: %s: byte offset %llu: %s\n", path.c_str(),
                 static_cast<unsigned long long>(summary->error->offset),
                 summary->error->message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace ringside::agent
