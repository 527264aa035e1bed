// ringside: one binary, one subcommand per job.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "agent/inspect_command.h"
#include "agent/record_command.h"
#include "agent/version.h"
#include "google/protobuf/stubs/logging.h"

namespace {

constexpr char kUsage[] =
    "ringside COMMAND [flags] [args]\n"
    "\n"
    "Commands:\n"
    "  record [-c config.pbtxt] [-o out.pftrace] [--duration 10s] [-- CMD ARGS...]\n"
    "                          record this machine (while CMD runs) into a trace file\n"
    "  inspect [--json] FILE   summarize a trace file: packets by type and sequence,\n"
    "                          losses, time range, processes, non-zero stats\n"
    "  help                    show this text\n"
    "\n"
    "Flags: ringside --help lists them.";

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
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig usage_config;
  usage_config.version_string = [] { return std::string("ringside ") + ringside::kVersion + "\n"; };
  // --help lists ringside's own flags, not Abseil's internal ones.
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "agent/");
  };
  absl::SetFlagsUsageConfig(usage_config);

  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());

  if (command == "inspect") return ringside::agent::RunInspectCommand(args);
  if (command == "record") return ringside::agent::RunRecordCommand(args);
  if (command == "help") {
    std::printf("%s\n", kUsage);
    return 0;
  }
  std::fprintf(stderr, "ringside: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return 2;
}
