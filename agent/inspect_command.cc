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
    // JSON strings must be UTF-8: bytes that are not become U+FFFD.
    const std::string json =
        SummaryToJson(path, *summary)
            .dump(2, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", json.c_str());
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
