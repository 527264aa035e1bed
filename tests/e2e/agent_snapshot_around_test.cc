// `ringside snapshot --around TIME`: the real agent asked for the window
// around a moment another node saw, in the cases a fan-out meets: the ring
// holds the window, holds part of it (the agent started within it), holds
// none of it (the window is older than the agent, or than what a wrapped
// ring kept).

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/tracefile/trace_inspector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

using ::testing::HasSubstr;

// A quiet event, so that the ring never wraps: it holds everything since
// the agent started.
constexpr char kQuietConfig[] = R"pb(
  buffers { size_kb: 4096 }
  data_sources {
    config {
      name: "linux.ftrace"
      ftrace_config { ftrace_events: "sched/sched_process_exec" }
    }
  }
  durable_buffer_size_kb: 512
  snapshot_request_cooldown_ms: 0
)pb";

// A 64 KiB ring of every switch: wrapped within moments.
constexpr char kWrappingConfig[] = R"pb(
  buffers { size_kb: 64 }
  data_sources {
    config {
      name: "linux.ftrace"
      ftrace_config { ftrace_events: "sched/sched_switch" }
    }
  }
  durable_buffer_size_kb: 512
  snapshot_request_cooldown_ms: 0
)pb";

// Unix seconds, as `--around` takes them.
std::string UnixSeconds(absl::Time t) {
  return absl::StrFormat("%.3f", absl::ToDoubleSeconds(t - absl::UnixEpoch()));
}

// `t` to the millisecond below: what UnixSeconds() says exactly.
absl::Time WholeMillis(absl::Time t) { return absl::FromUnixMillis(absl::ToUnixMillis(t)); }

// "the ring no longer holds the window A .. B": the window as asked, to the
// microsecond (not converted to the trace's clock and back, which put it
// some microseconds off).
std::string NotHeld(absl::Time moment, absl::Duration window) {
  return absl::StrCat("the ring no longer holds the window ",
                      FormatRealtime(absl::ToUnixNanos(moment - window / 2)), " .. ",
                      FormatRealtime(absl::ToUnixNanos(moment + window / 2)), ": ");
}

class AgentSnapshotAroundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's ftrace source needs root";
  }
  // Starts the agent; ready_ is when it said it records.
  void Start(const char* config) {
    ASSERT_TRUE(WriteTextFile(dir_.Join("agent.pbtxt"), config));
    mkdir(dir_.Join("run").c_str(), 0755);
    agent_ = std::make_unique<AgentProcess>(
        std::vector<std::string>{"-c", dir_.Join("agent.pbtxt"), "--socket", socket_, "--run-dir",
                                 dir_.Join("run"), "--output-dir", dir_.Join("out")},
        dir_.Join("agent.log"), notify_.path());
    const absl::Status ready = agent_->WaitReady(&notify_, absl::Seconds(60));
    ASSERT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent_->Log();
    ready_ = absl::Now();
  }
  // `ringside snapshot --around ...` once: its stderr.
  std::string Snapshot(const std::vector<std::string>& flags, int* code) {
    std::vector<std::string> args = {"snapshot", "--socket", socket_};
    args.insert(args.end(), flags.begin(), flags.end());
    return RunRingsideCaptureStderr(args, code);
  }
  // The snapshot files in the output directory.
  std::vector<std::string> Snapshots() {
    std::vector<std::string> files;
    for (const std::string& name : ListDir(dir_.Join("out"))) {
      if (name.size() > 8 && name.substr(name.size() - 8) == ".pftrace") {
        files.push_back(dir_.Join("out/" + name));
      }
    }
    return files;
  }
  nlohmann::json Sidecar(const std::string& path) {
    std::ifstream in(path + ".json");
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  ScratchDir dir_;
  const std::string socket_ = dir_.Join("control.sock");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  absl::Time ready_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentSnapshotAroundTest, AWindowTheRingHoldsIsInTheFileAndSaidToBeHeld) {
  ASSERT_NO_FATAL_FAILURE(Start(kQuietConfig));
  absl::SleepFor(absl::Seconds(3));
  const absl::Time moment = absl::Now() - absl::Seconds(1);
  int code = -1;
  const std::string path = RunRingsideCapture(
      {"snapshot", "--socket", socket_, "--around", UnixSeconds(moment), "--window", "1s"}, &code);
  ASSERT_EQ(code, 0) << agent_->Log();
  ASSERT_FALSE(path.empty());
  const std::string file = path.substr(0, path.size() - 1);  // Its newline.
  EXPECT_THAT(file, HasSubstr("-request-around.pftrace"));
  const nlohmann::json sidecar = Sidecar(file);
  ASSERT_EQ(sidecar["snapshot_windows"].size(), 1u) << sidecar.dump();
  EXPECT_EQ(sidecar["snapshot_windows"][0]["held"], true);
  EXPECT_EQ(sidecar["held"]["ring_wrapped"], false);
  // The window is the one asked, placed on the wall clock within the
  // error of converting between clocks.
  const int64_t first_ns = sidecar["snapshot_windows"][0]["first"]["boottime_ns"].get<int64_t>();
  const int64_t last_ns = sidecar["snapshot_windows"][0]["last"]["boottime_ns"].get<int64_t>();
  EXPECT_EQ(last_ns - first_ns, 1'000'000'000);
  // And `inspect` says so.
  const std::string text = RunRingsideCapture({"inspect", file}, &code);
  EXPECT_THAT(text, HasSubstr(", held whole\n"));
}

TEST_F(AgentSnapshotAroundTest, AWindowOverBeforeTheAgentStartedIsRefusedWithoutAFile) {
  ASSERT_NO_FATAL_FAILURE(Start(kQuietConfig));
  // The window ends ten seconds before the agent was ready.
  const absl::Time moment = WholeMillis(ready_ - absl::Seconds(15));
  int code = -1;
  const std::string err = Snapshot({"--around", UnixSeconds(moment), "--window", "10s"}, &code);
  EXPECT_EQ(code, 1) << err;
  EXPECT_THAT(err, HasSubstr(NotHeld(moment, absl::Seconds(10))));
  EXPECT_THAT(err, HasSubstr("it ended before this agent started recording, at "));
  EXPECT_TRUE(Snapshots().empty());
}

// Issue 52: a request refused for its window still spent the request
// cooldown, so the next one (the window fixed) was refused too.
TEST_F(AgentSnapshotAroundTest, ARequestRefusedForItsWindowSpendsNoCooldown) {
  std::string config = kQuietConfig;
  config.replace(config.find("snapshot_request_cooldown_ms: 0"),
                 std::string("snapshot_request_cooldown_ms: 0").size(),
                 "snapshot_request_cooldown_ms: 600000");
  ASSERT_NO_FATAL_FAILURE(Start(config.c_str()));
  absl::SleepFor(absl::Seconds(2));
  int code = -1;
  std::string err =
      Snapshot({"--around", UnixSeconds(ready_ - absl::Seconds(15)), "--window", "10s"}, &code);
  EXPECT_EQ(code, 1) << err;
  EXPECT_THAT(err, HasSubstr("it ended before this agent started recording"));
  err =
      Snapshot({"--around", UnixSeconds(absl::Now() - absl::Seconds(1)), "--window", "1s"}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(Snapshots().size(), 1u);
  // The cooldown is spent now.
  err = Snapshot({"--reason", "next"}, &code);
  EXPECT_EQ(code, 1) << err;
  EXPECT_THAT(err, HasSubstr("snapshot_request_cooldown_ms"));
}

TEST_F(AgentSnapshotAroundTest, AWindowAWrappedRingLetGoOfIsAnErrorNamingWhatItHoldsAndWhere) {
  ASSERT_NO_FATAL_FAILURE(Start(kWrappingConfig));
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(1);
  // Half a second just after the start: long since overwritten by 64 KiB of
  // switches, four seconds on.
  absl::SleepFor(absl::Seconds(4));
  int code = -1;
  const absl::Time moment = WholeMillis(ready_ + absl::Milliseconds(750));
  const std::string err = Snapshot({"--around", UnixSeconds(moment), "--window", "500ms"}, &code);
  ringside::testing::StopProcesses(storm);
  EXPECT_EQ(code, 1) << err;
  EXPECT_THAT(err, HasSubstr(NotHeld(moment, absl::Milliseconds(500)) + "it holds "));
  const std::vector<std::string> files = Snapshots();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_THAT(err, HasSubstr(files[0]));  // What is left is in that file.
}

TEST_F(AgentSnapshotAroundTest, AWindowTheAgentStartedInIsHeldInPartAndSaysFromWhen) {
  ASSERT_NO_FATAL_FAILURE(Start(kQuietConfig));
  // From 5 s before the agent was ready to 2 s after: it started recording
  // in between.
  absl::SleepFor(absl::Seconds(3));
  const absl::Time moment = ready_ - absl::Milliseconds(1500);
  int code = -1;
  const std::string err = Snapshot({"--around", UnixSeconds(moment), "--window", "7s"}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_THAT(err, HasSubstr("the ring held only part of the window: it holds "));
  const std::vector<std::string> files = Snapshots();
  ASSERT_EQ(files.size(), 1u);
  const nlohmann::json sidecar = Sidecar(files[0]);
  ASSERT_EQ(sidecar["snapshot_windows"].size(), 1u) << sidecar.dump();
  EXPECT_EQ(sidecar["snapshot_windows"][0]["held"], false);
}

}  // namespace
}  // namespace ringside::agent::testing
