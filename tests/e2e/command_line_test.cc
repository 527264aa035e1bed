// The command line every subcommand shares: flags as perf and trace-cmd
// users type them, help texts, exit statuses.

#include "agent/cli/command_line.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/ringside_cli.h"

namespace ringside::agent {
namespace {

CommandSpec TestSpec() {
  return CommandSpec{
      "record",
      "ringside record [flags]",
      "Records.",
      {{'c', "config", "FILE", "config", false},
       {'e', "event", "EVENT", "event", true},
       {'v', "verbose", "", "more", false},
       {'z', "compress", "CODEC", "compress", false, /*optional_value=*/true}},
      "  ringside record\n",
      0,
      true,
  };
}

TEST(CommandLineTest, FlagsAreSpelledEveryWayUsersTypeThem) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-c", "a.pbtxt"}, {"-ca.pbtxt"}, {"--config", "a.pbtxt"}, {"--config=a.pbtxt"}}) {
    absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), args);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Get("config"), "a.pbtxt");
  }
}

// An optional value (perf's -z, our --compress[=CODEC]) comes after '=' or
// attached to the short form; the next argument is never taken for it.
TEST(CommandLineTest, AnOptionalValueIsGivenWithEqualsOrAttachedNeverAsTheNextArgument) {
  for (const auto& [args, value] : {std::pair<std::vector<std::string>, std::string>{{"-z"}, ""},
                                    {{"--compress"}, ""},
                                    {{"--compress=zstd:9"}, "zstd:9"},
                                    {{"-zdeflate"}, "deflate"},
                                    {{"-z=deflate"}, "deflate"}}) {
    absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), args);
    ASSERT_TRUE(p.ok()) << args[0] << ": " << p.status();
    EXPECT_TRUE(p->Has("compress")) << args[0];
    EXPECT_EQ(p->Get("compress", "unset"), value) << args[0];
  }
  absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), {"-z", "zstd", "-v"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Get("compress", "unset"), "");
  EXPECT_EQ(p->command, (std::vector<std::string>{"zstd", "-v"}));
  EXPECT_NE(UsageText(TestSpec()).find("-z, --compress[=CODEC]"), std::string::npos);
}

// "--compress=" (a variable that expanded to nothing) is not "--compress":
// it would silently mean the default codec (issue 52).
TEST(CommandLineTest, AnOptionalValueGivenEmptyAfterEqualsIsRefused) {
  for (const std::string arg : {"--compress=", "-z="}) {
    absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), {arg});
    ASSERT_FALSE(p.ok()) << arg;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(arg + " has nothing after '=': give a CODEC"),
              std::string::npos)
        << p.status();
  }
}

TEST(CommandLineTest, RepeatableFlagsCollectEveryValueOthersAreGivenOnce) {
  absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), {"-e", "a:b", "--event=c:d", "-v"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->All("event"), (std::vector<std::string>{"a:b", "c:d"}));
  EXPECT_TRUE(p->Has("verbose"));
  EXPECT_FALSE(ParseArgs(TestSpec(), {"-c", "a", "-c", "b"}).ok());
}

TEST(CommandLineTest, TheCommandStartsAtDashDashOrTheFirstPositional) {
  absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), {"-v", "--", "sh", "-c", "exit 3"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->command, (std::vector<std::string>{"sh", "-c", "exit 3"}));
  p = ParseArgs(TestSpec(), {"sleep", "-x"});  // -x belongs to sleep, as with perf record.
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->command, (std::vector<std::string>{"sleep", "-x"}));
}

TEST(CommandLineTest, UnknownFlagsMissingValuesAndValuesOfBooleansAreErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json"}, {"-o", "x"}, {"-c"}, {"--verbose=yes"}}) {
    absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), args);
    ASSERT_FALSE(p.ok()) << args[0];
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  }
  absl::StatusOr<ParsedArgs> p = ParseArgs(TestSpec(), {"--json"});
  EXPECT_NE(p.status().message().find("unknown flag '--json'"), std::string::npos) << p.status();
}

TEST(CommandLineTest, SizesTakeTheUnitsUsersType) {
  EXPECT_EQ(*ParseSizeKb("64M"), 65536u);
  EXPECT_EQ(*ParseSizeKb("64mb"), 65536u);
  EXPECT_EQ(*ParseSizeKb("64MiB"), 65536u);
  EXPECT_EQ(*ParseSizeKb("512k"), 512u);
  EXPECT_EQ(*ParseSizeKb("1G"), 1048576u);
  EXPECT_EQ(*ParseSizeKb("2048"), 2048u);  // KiB, as trace-cmd's -b.
  EXPECT_FALSE(ParseSizeKb("lots").ok());
  EXPECT_FALSE(ParseSizeKb("12T").ok());
  EXPECT_FALSE(ParseSizeKb("99999999999999G").ok());
}

// `-b 1.5M` is how people write a buffer size; a fraction that is no whole
// number of KiB is refused with a reason, not taken for a unit.
TEST(CommandLineTest, SizesTakeFractionsThatComeToWholeKib) {
  EXPECT_EQ(ParseSizeKb("1.5M").value_or(0), 1536u);
  EXPECT_EQ(ParseSizeKb("0.25G").value_or(0), 262144u);
  EXPECT_EQ(ParseSizeKb("2.0k").value_or(0), 2u);
  absl::StatusOr<uint64_t> kb = ParseSizeKb("1.5");
  ASSERT_FALSE(kb.ok());
  EXPECT_NE(kb.status().message().find("not a whole number of KiB"), std::string::npos)
      << kb.status();
  EXPECT_FALSE(ParseSizeKb("1.M").ok());
  EXPECT_FALSE(ParseSizeKb(".5M").ok());
  EXPECT_FALSE(ParseSizeKb("1.2.3M").ok());
  EXPECT_FALSE(ParseSizeKb("1048577.5G").ok());
}

TEST(CommandLineTest, ClosestNameIsWithinTwoEdits) {
  const std::vector<std::string> names = {"record", "inspect", "list", "status", "stop"};
  EXPECT_EQ(ClosestName("recrod", names), "record");
  EXPECT_EQ(ClosestName("inspcet", names), "inspect");
  EXPECT_EQ(ClosestName("lsit", names), "list");
  EXPECT_EQ(ClosestName("stauts", names), "status");
  EXPECT_EQ(ClosestName("frobnicate", names), "");
  EXPECT_EQ(ClosestName("", names), "");
}

TEST(CommandLineTest, HelpListsEveryFlagWithinEightyColumns) {
  const std::string text = UsageText(TestSpec());
  for (const char* s : {"usage: ringside record", "-c, --config FILE", "-e, --event EVENT",
                        "-h, --help", "Examples:"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
}

// The binary: every subcommand's help, from each place a user asks for it.
TEST(CommandLineTest, EverySubcommandHasItsOwnHelpExitingZero) {
  for (const std::string cmd : {"record", "inspect", "list"}) {
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}}) {
      int code = -1;
      const std::string out = testing::RunRingsideCapture(args, &code);
      EXPECT_EQ(code, 0) << cmd;
      EXPECT_TRUE(absl::StartsWith(out, "usage: ringside " + cmd)) << out;
      EXPECT_NE(out.find("Examples:"), std::string::npos) << out;
      for (absl::string_view line : absl::StrSplit(out, '\n')) {
        EXPECT_LE(line.size(), 100u) << line;
      }
      // Our own text, not a flags library's.
      EXPECT_EQ(out.find("Flags from"), std::string::npos) << out;
    }
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    int code = -1;
    const std::string out = testing::RunRingsideCapture(args, &code);
    EXPECT_EQ(code, 0);
    for (const char* cmd : {"record", "inspect", "list"}) {
      EXPECT_NE(out.find(cmd), std::string::npos) << out;
    }
  }
}

TEST(CommandLineTest, HelpHelpPrintsHelpsOwnUsage) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"help", "help"}, {"help", "--help"}}) {
    int code = -1;
    const std::string out = testing::RunRingsideCapture(args, &code);
    EXPECT_EQ(code, 0) << args[1];
    EXPECT_TRUE(absl::StartsWith(out, "usage: ringside help [COMMAND]")) << out;
  }
}

// A typo gets a hint, not the whole usage to search.
TEST(CommandLineTest, MisspelledCommandIsNamedWithTheClosestOne) {
  int code = -1;
  const std::string err = testing::RunRingsideCaptureStderr({"recrod"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_TRUE(absl::StartsWith(err, "ringside: unknown command 'recrod'; did you mean 'record'?\n"))
      << err;
  EXPECT_EQ(err.find("Commands:"), std::string::npos) << err;
}

TEST(CommandLineTest, UsageErrorsExitTwoAndNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "usage: ringside COMMAND"},
           {{"frobnicate"}, "unknown command 'frobnicate'"},
           {{"inspect", "-c", "x.pbtxt", "f"}, "unknown flag '-c' for ringside inspect"},
           {{"record", "--json"}, "unknown flag '--json' for ringside record"},
           {{"record", "-o"}, "-o needs a value"},
           {{"record", "--duration", "soon"}, "not a duration"},
           {{"record", "-b", "lots"}, "not a size"},
           {{"record", "-e", "sched_switch"}, "an event is group:name"},
           {{"help", "frobnicate"}, "no command 'frobnicate'"},
           {{"recrod"}, "unknown command 'recrod'; did you mean 'record'?"},
           {{"help", "inspcet"}, "no command 'inspcet'; did you mean 'inspect'?"},
           {{"record", "-b", "1.5"}, "not a whole number of KiB"},
           {{"inspect"}, "needs a FILE"},
       }) {
    int code = -1;
    const std::string err = testing::RunRingsideCaptureStderr(c.args, &code);
    EXPECT_EQ(code, 2) << c.says;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace ringside::agent
