// `ringside inspect` of a recording with stacks (the workload of
// tests/tools/stack_workload.c, as tests/e2e/stacks_test.cc records it):
// its top blocked stacks show where the pipe reader waited, its top CPU
// stacks where the spinner ran, without trace_processor.

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

using testing::TempPath;

// Whether a frame named `function` is in one of the top stacks of `kind`
// ("blocked", "cpu") of inspect's JSON.
bool InTopStacks(const nlohmann::json& inspect, const char* kind, const std::string& function) {
  for (const nlohmann::json& stack : inspect["stacks"][kind]["top"]) {
    for (const nlohmann::json& frame : stack["frames"]) {
      if (frame["name"] == function) return true;
    }
  }
  return false;
}

TEST(StacksInspectTest, TopStacksShowWhereTheReaderWaitedAndWhereTheSpinnerRan) {
  const std::string workload = absl::StrCat(ringside::testing::BuildDir(), "/stack_workload");
  ASSERT_EQ(access(workload.c_str(), X_OK), 0) << workload << " (make builds it)";
  const std::string cfg = TempPath("stacks_inspect.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\"\n"
                        "  bpf_config { stacks { blocked: true } } } }\n";
  const std::string out = TempPath("stacks_inspect.pftrace");
  const std::string result = TempPath("stacks_inspect.result");
  int code = 0;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "--", workload, "2", result}, &code);
  if (absl::StrContains(err, "linux.bpf disabled")) GTEST_SKIP() << "BPF did not load: " << err;
  ASSERT_EQ(code, 0) << err;

  // The whole machine was recorded: a stack many threads share (a pool's
  // idle workers) may weigh more than the workload's, hence more than the
  // default 5.
  const std::string json =
      testing::RunRingsideCapture({"inspect", "--json", "--top", "20", out}, &code);
  ASSERT_EQ(code, 0) << json;
  const nlohmann::json inspect = nlohmann::json::parse(json);
  // Of a 2 s recording, the reader alone waited most of 2 s, in one stack;
  // the spinner ran most of it, in one stack.
  EXPECT_TRUE(InTopStacks(inspect, "blocked", "wait_for_pipe_data")) << inspect["stacks"].dump(1);
  EXPECT_TRUE(InTopStacks(inspect, "cpu", "burn_cpu_in_hot_loop")) << inspect["stacks"].dump(1);
  EXPECT_GT(inspect["stacks"]["blocked"]["weight_ns"].get<uint64_t>(), 1'000'000'000u);
  // Naming them read the workload's maps (and the other processes'), each
  // counted in the file's trace_stats.
  EXPECT_GE(inspect["stacks"]["user_naming"]["maps_reads"].get<uint64_t>(), 1u)
      << inspect["stacks"].dump(1);

  const std::string text = testing::RunRingsideCapture({"inspect", "--top", "20", out}, &code);
  EXPECT_TRUE(absl::StrContains(text, "Top blocked stacks")) << text;
  EXPECT_TRUE(absl::StrContains(text, "[.] wait_for_pipe_data\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "[.] burn_cpu_in_hot_loop\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "  naming user frames: ")) << text;
  unlink(cfg.c_str());
  unlink(out.c_str());
  unlink(result.c_str());
}

}  // namespace
}  // namespace ringside::agent
