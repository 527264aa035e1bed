#ifndef RINGSIDE_AGENT_CLI_COMMAND_LINE_H_
#define RINGSIDE_AGENT_CLI_COMMAND_LINE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::agent {

// Exit statuses every subcommand shares.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // It ran and failed (a file not written, ...).
inline constexpr int kExitUsage = 2;    // Bad arguments or config: nothing was done.

// One flag of a subcommand, spelled the way perf and trace-cmd users type
// it: "-o FILE", "-oFILE", "--output FILE", "--output=FILE".
struct FlagSpec {
  char short_name = 0;     // 0: no short form.
  std::string long_name;   // Without the dashes; the key of its values.
  std::string value_name;  // Empty: a boolean flag that takes no value.
  std::string help;
  bool repeatable = false;
  // The value may be left out ("--compress" or "--compress=zstd"): it is
  // then "", and the next argument is never taken as the value. An empty
  // one given with '=' ("--compress=") is an error.
  bool optional_value = false;
};

// What a subcommand accepts, and its help text.
struct CommandSpec {
  std::string name;
  std::string synopsis;  // "ringside record [flags] [-- CMD ARGS...]"
  std::string summary;   // One paragraph: what it does.
  std::vector<FlagSpec> flags;
  std::string examples;  // Lines, each "  ringside ...  # why".
  // Positional arguments: at most this many (-1: any number).
  int max_positional = 0;
  // `record`: the first positional argument starts the command to run,
  // and everything after it belongs to that command (as with perf record).
  bool rest_is_command = false;
};

struct ParsedArgs {
  bool help = false;
  // Values by long name; a boolean flag holds one empty string when given.
  std::map<std::string, std::vector<std::string>> flags;
  std::vector<std::string> positional;
  std::vector<std::string>
      command;  // After "--", or from the first positional with rest_is_command.

  bool Has(const std::string& long_name) const { return flags.count(long_name) > 0; }
  // The last value given, or `fallback`.
  std::string Get(const std::string& long_name, const std::string& fallback = "") const;
  const std::vector<std::string>& All(const std::string& long_name) const;
};

// Parses a subcommand's arguments (without "ringside CMD"). -h/--help set
// `help` and stop parsing. kInvalidArgument names the bad argument: an
// unknown flag (a flag of another subcommand included), a missing value, a
// repeated flag that is not repeatable, too many arguments.
absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& args);

// The subcommand's help: synopsis, summary, flags, examples.
std::string UsageText(const CommandSpec& spec);

// Prints "ringside CMD: <message>" and a pointer to --help on stderr;
// returns kExitUsage.
int UsageError(const CommandSpec& spec, const std::string& message);

// The one of `names` closest to `typed` (fewest single-character inserts,
// deletes, substitutions and swaps of neighbours), if it is at most two
// edits away and closer than any other; empty otherwise. For "did you mean".
std::string ClosestName(const std::string& typed, const std::vector<std::string>& names);

// Sizes as users type them: "64M", "64MiB", "64mb", "512k", "1G", "1.5M"; a
// plain number is KiB (as trace-cmd's -b). A fraction must come to a whole
// number of KiB. Returns KiB.
absl::StatusOr<uint64_t> ParseSizeKb(const std::string& text);

// Durations as users type them: "10s", "500ms", "2m", "1h30m"; a plain
// number is seconds. Only positive ones; errors name `flag` ("--timeout")
// and the text.
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& flag, const std::string& text);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_COMMAND_LINE_H_
