// Shipping the agent's files with an existing tool: deploy/shipping/
// ringside-ship (rclone move of finished files only) run again and again
// beside an agent that streams rotating files under a scheduling storm and
// takes a snapshot meanwhile. What reaches the destination is only ever
// whole traces, each with its sidecar, as the sidecar describes them.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/output/output_dir.h"
#include "agent/snapshots/snapshot_retention.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/tracefile/trace_inspector.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/paths.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

// Small files, rotated often, so that many are finished while the
// shipper runs.
constexpr char kConfig[] = R"pb(
  buffers { size_kb: 4096 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 512 }
    }
  }
  durable_buffer_size_kb: 1024
  write_into_file: true
  file_write_period_ms: 100
  max_file_size_bytes: 262144
  max_files: 20
)pb";

std::string Output(const std::string& command, int* code) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    *code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class AgentShippingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    int code = 0;
    Output("command -v rclone", &code);
    ASSERT_EQ(code, 0) << "rclone is not installed: run make deps";
    ASSERT_TRUE(WriteTextFile(dir_.Join("agent.pbtxt"), kConfig));
    ASSERT_TRUE(WriteTextFile(dir_.Join("rclone.conf"), ""));
    mkdir(dir_.Join("run").c_str(), 0755);
    mkdir(out_.c_str(), 0750);
    mkdir(dest_.c_str(), 0750);
  }
  // One run of the shipper, as its timer or its pod's loop runs it.
  void Ship() {
    int code = 0;
    const std::string out =
        Output(absl::StrCat(ringside::testing::SourceDir(), "/deploy/shipping/ringside-ship ", out_,
                            " ", dest_, " --config ", dir_.Join("rclone.conf"), " -q"),
               &code);
    EXPECT_EQ(code, 0) << out;
    runs_++;
  }

  ScratchDir dir_;
  std::string out_ = dir_.Join("out");
  std::string dest_ = dir_.Join("remote");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  int runs_ = 0;
};

// ringside-ship with an rclone of the test's in front of the real one on
// PATH, over pairs named as the agent names its snapshots: what a run that
// fails leaves, without an agent (none is needed to fail a remote).
class ShipperFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mkdir(out_.c_str(), 0700);
    mkdir(dest_.c_str(), 0700);
    mkdir(bin_.c_str(), 0700);
    for (int i = 0; i < 4; i++) {
      const std::string name =
          SnapshotFileName("h", absl::FromUnixSeconds(1795000000 + 60 * i), "crash");
      ASSERT_TRUE(WriteTextFile(dir_.Join("out/" + name), "trace"));
      ASSERT_TRUE(WriteTextFile(dir_.Join("out/" + name + ".json"), "{}"));
      pairs_.insert(name);
      pairs_.insert(name + ".json");
    }
  }
  // `rclone`: the body of the shell script that stands for rclone.
  void FakeRclone(const std::string& body) {
    const std::string path = bin_ + "/rclone";
    ASSERT_TRUE(WriteTextFile(path, "#!/bin/sh\n" + body + "\n"));
    ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  }
  // One run of the shipper; its exit code.
  int Ship(std::string* out = nullptr) {
    int code = 0;
    const std::string printed = Output(
        absl::StrCat("PATH=", bin_, ":$PATH ", ringside::testing::SourceDir(),
                     "/deploy/shipping/ringside-ship ", out_, " ", dest_, " --config /dev/null -q"),
        &code);
    if (out != nullptr) *out = printed;
    return code;
  }

  ScratchDir dir_;
  std::string out_ = dir_.Join("out");
  std::string dest_ = dir_.Join("remote");
  std::string bin_ = dir_.Join("bin");
  std::set<std::string> pairs_;
};

// The remote down: each run claims every pair, fails, and puts them all
// back, where the agent's retention counts (and deletes) them. Claimed
// files left behind would be out of its sight: piling up for as long as
// the remote is down.
TEST_F(ShipperFailureTest, AFailedRunPutsWhatItClaimedBackWhereRetentionCountsIt) {
  FakeRclone("echo 'rclone: the remote is down' >&2; exit 1");
  for (int run = 0; run < 2; run++) {
    std::string printed;
    EXPECT_NE(Ship(&printed), 0) << printed;
    EXPECT_TRUE(absl::StrContains(printed, "the remote is down")) << printed;
    EXPECT_EQ(ListDir(out_), pairs_) << "after failed run " << run + 1;
  }
  absl::StatusOr<std::unique_ptr<OutputDir>> dir = OutputDir::Open(out_, std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status();
  const PruneResult pruned = PruneSnapshots(**dir, "h", /*max_files=*/2, 0, "");
  EXPECT_EQ(pruned.files_deleted, 2u);
  EXPECT_EQ(ListTraces(out_).size(), 2u);
  EXPECT_EQ(ListDir(out_).size(), 4u) << absl::StrJoin(ListDir(out_), " ");
  EXPECT_TRUE(ListDir(dest_).empty());
}

// Stopped while rclone runs (systemctl stop: SIGTERM to the script and
// rclone): what it claimed goes back as after a failure.
TEST_F(ShipperFailureTest, AStoppedRunPutsWhatItClaimedBack) {
  FakeRclone("kill -TERM $PPID; sleep 1; exit 1");
  EXPECT_EQ(Ship(), 143);
  EXPECT_EQ(ListDir(out_), pairs_);
}

// The traces reached the remote, their sidecars did not: the sidecars stay
// claimed (their traces are not in SOURCE_DIR to pair with) and the next
// run moves them on.
TEST_F(ShipperFailureTest, SidecarsOfTracesThatMovedStayClaimedForTheNextRun) {
  int found = 0;
  const std::string real = Output("command -v rclone", &found);
  ASSERT_EQ(found, 0) << "rclone is not installed: run make deps";
  FakeRclone(absl::StrCat("case $3 in */sidecars) exit 1 ;; esac\nexec ",
                          absl::StripTrailingAsciiWhitespace(real), " \"$@\""));
  EXPECT_NE(Ship(), 0);
  std::set<std::string> traces, sidecars;
  for (const std::string& n : pairs_) (absl::EndsWith(n, ".json") ? sidecars : traces).insert(n);
  EXPECT_EQ(ListDir(dest_), traces);
  EXPECT_EQ(ListDir(out_), (std::set<std::string>{".ringside-ship"}));
  EXPECT_EQ(ListDir(out_ + "/.ringside-ship"), sidecars);
  ASSERT_EQ(unlink((bin_ + "/rclone").c_str()), 0);
  EXPECT_EQ(Ship(), 0);
  EXPECT_EQ(ListDir(dest_), pairs_);
  EXPECT_TRUE(ListDir(out_).empty()) << absl::StrJoin(ListDir(out_), " ");
}

TEST_F(AgentShippingTest, OnlyWholeFilesWithTheirSidecarsAreTakenUnderAStorm) {
  const std::string socket = dir_.Join("control.sock");
  AgentProcess agent({"-c", dir_.Join("agent.pbtxt"), "--socket", socket, "--run-dir",
                      dir_.Join("run"), "--output-dir", out_},
                     dir_.Join("agent.log"), notify_.path());
  const absl::Status ready = agent.WaitReady(&notify_, absl::Seconds(60));
  ASSERT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent.Log();
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  const absl::Time start = absl::Now(), end = start + absl::Seconds(12);
  bool snapshot_taken = false;
  while (absl::Now() < end || !snapshot_taken) {
    Ship();
    if (!snapshot_taken && absl::Now() - start >= absl::Seconds(3)) {
      int code = -1;
      const std::string out = RunRingsideCapture({"snapshot", "--wait", "--socket", socket}, &code);
      EXPECT_EQ(code, 0) << out;
      snapshot_taken = true;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  ringside::testing::StopProcesses(storm);
  ASSERT_TRUE(agent.Signal(SIGTERM));
  const std::optional<int> exited = agent.WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exited.has_value()) << agent.Log();
  EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0) << agent.Log();
  Ship();  // What the agent finished as it stopped.

  std::set<std::string> traces, sidecars;
  for (const std::string& name : ListDir(dest_)) {
    EXPECT_FALSE(absl::StartsWith(name, ".")) << name << ": a temporary file was taken";
    EXPECT_FALSE(absl::EndsWith(name, ".partial")) << name << ": a file being written was taken";
    if (absl::EndsWith(name, ".pftrace")) traces.insert(name);
    if (absl::EndsWith(name, ".pftrace.json")) sidecars.insert(name);
  }
  EXPECT_GE(traces.size(), 5u) << "in " << runs_ << " runs";
  int snapshots = 0;
  for (const std::string& trace : traces) {
    SCOPED_TRACE(trace);
    ASSERT_EQ(sidecars.count(trace + ".json"), 1u)
        << "a trace without its sidecar was taken; left in " << out_ << ": "
        << absl::StrJoin(ListDir(out_), " ") << "\nthe agent said:\n"
        << agent.Log();
    std::ifstream in(dest_ + "/" + trace + ".json");
    const nlohmann::json sidecar = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(sidecar.is_object()) << "its sidecar is not whole JSON";
    // The file as it was when its sidecar was written: whole.
    absl::StatusOr<TraceSummary> s = InspectTraceFile(dest_ + "/" + trace);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE(s->error.has_value()) << s->error->message;
    ASSERT_TRUE(s->digest.has_value());
    EXPECT_EQ(sidecar["sha256"], s->digest->sha256);
    EXPECT_EQ(sidecar["size_bytes"], s->digest->size);
    EXPECT_GT(s->ftrace_events, 0u);
    if (!s->snapshot_triggers.empty()) snapshots++;
  }
  for (const std::string& sidecar : sidecars) {
    EXPECT_EQ(traces.count(sidecar.substr(0, sidecar.size() - 5)), 1u)
        << sidecar << " came without its trace";
  }
  EXPECT_EQ(snapshots, 1);
  // The agent finished every file before it exited: nothing is left behind
  // but what retention never had to keep.
  for (const std::string& name : ListDir(out_)) {
    EXPECT_FALSE(absl::EndsWith(name, ".pftrace")) << name << " was left unfinished";
    EXPECT_NE(name, ".ringside-ship") << "the shipper's claimed files were left behind";
  }
}

}  // namespace
}  // namespace ringside::agent::testing
