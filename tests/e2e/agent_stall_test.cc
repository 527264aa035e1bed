// Issue 56: a task's stall fires a snapshot by itself. A task held in D for
// 2 s fires `blocked`, named, while it is still blocked (the agent's sweep
// of the tasks the programs follow), and the file holds its wakeup's
// record; one held 50 ms does not. A task woken beside three CPU hogs
// pinned to its CPU waits for it, and fires `runqueue_delay` naming it and
// the CPU. The programs measure both in the kernel (bpf/stalls.bpf.h).

#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

constexpr char kConfig[] = R"pb(
  buffers { size_kb: 8192 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 256 }
    }
  }
  trigger_config {
    trigger_mode: CLONE_SNAPSHOT
    triggers {
      name: "stuck"
      stop_delay_ms: 4000
      cooldown_ms: 600000
      blocked { threshold_ms: 1000 comms: "rskt-held" }
    }
    triggers {
      name: "starved"
      stop_delay_ms: 200
      cooldown_ms: 600000
      runqueue_delay { threshold_ms: 100 comms: "rskt-wakee" }
    }
  }
)pb";

std::vector<std::string> Snapshots(const std::string& dir, const std::string& trigger) {
  std::vector<std::string> out;
  for (const std::string& f : ListDir(dir)) {
    if (absl::EndsWith(f, "-" + trigger + ".pftrace") && f[0] != '.') {
      out.push_back(dir + "/" + f);
    }
  }
  return out;
}

// Waits up to `limit` for a snapshot of `trigger`.
std::vector<std::string> AwaitSnapshots(const std::string& dir, const std::string& trigger,
                                        absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  std::vector<std::string> files;
  while ((files = Snapshots(dir, trigger)).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  return files;
}

nlohmann::json Inspect(const std::string& file) {
  int code = -1;
  const std::string json = RunRingsideCapture({"inspect", "--json", file}, &code);
  EXPECT_EQ(code, 0) << json;
  return nlohmann::json::parse(json);
}

class AgentStallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the agent needs root";
    mkdir(dir_.Join("run").c_str(), 0755);
    std::ofstream(dir_.Join("agent.pbtxt")) << kConfig;
    agent_ = std::make_unique<AgentProcess>(
        std::vector<std::string>{"-c", dir_.Join("agent.pbtxt"), "--socket", socket_, "--run-dir",
                                 dir_.Join("run"), "--output-dir", snaps_},
        dir_.Join("agent.log"), notify_.path());
    ASSERT_TRUE(agent_->WaitReady(&notify_, absl::Seconds(60)).ok()) << agent_->Log();
  }

  ScratchDir dir_;
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  const std::string socket_ = dir_.Join("control.sock");
  const std::string snaps_ = dir_.Join("snaps");
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentStallTest, ATaskLongInDFiresBlockedNamingItAndAShortOneDoesNot) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  // 50 ms in D: under the threshold, at its wakeup and at every sweep.
  const pid_t brief = ringside::testing::HoldInD("rskt-held", "rskt-kid", 50);
  ASSERT_GT(brief, 0);
  ASSERT_EQ(waitpid(brief, nullptr, 0), brief);
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(Snapshots(snaps_, "stuck").empty()) << agent_->Log();

  // 3 s in D: the sweep finds it still blocked after a second.
  const pid_t held = ringside::testing::HoldInD("rskt-held", "rskt-kid", 3000);
  ASSERT_GT(held, 0);
  const std::vector<std::string> files = AwaitSnapshots(snaps_, "stuck", absl::Seconds(30));
  ASSERT_EQ(waitpid(held, nullptr, 0), held);
  ASSERT_EQ(files.size(), 1u) << agent_->Log();
  EXPECT_TRUE(absl::StrContains(
      agent_->Log(),
      absl::StrCat("trigger stuck from the kernel (pid ", held, " (rskt-held) blocked in D for ")))
      << agent_->Log();
  const nlohmann::json j = Inspect(files[0]);
  ASSERT_EQ(j["snapshot_triggers"].size(), 1u) << j.dump();
  const nlohmann::json& t = j["snapshot_triggers"][0];
  EXPECT_EQ(t["producer_name"], "linux.bpf");
  const std::string detail = t["detail"];
  EXPECT_TRUE(
      absl::StartsWith(detail, absl::StrCat("pid ", held, " (rskt-held) blocked in D for ")))
      << detail;
  EXPECT_TRUE(absl::StrContains(detail, "not woken yet")) << detail;
  EXPECT_EQ(
      QueryInt(tp, files[0], "select count(*) from stats where severity = 'error' and value > 0"),
      0);
  // Fired before the task woke (the detail says so), and its wakeup came
  // within the stop delay (4 s after a sweep that finds it at 1 to 1.25 s):
  // the record of the whole block,
  // under the child that woke it, 3 s long.
  EXPECT_EQ(
      QueryInt(tp, files[0],
               absl::StrCat("select count(*) from ftrace_event e join args a using(arg_set_id) "
                            "where e.name = 'ringside_task_blocked' and a.key = 'pid' and "
                            "a.int_value = ",
                            held)),
      1);
  EXPECT_GE(QueryInt(tp, files[0],
                     "select max(a.int_value) from ftrace_event e join args a using(arg_set_id) "
                     "where e.name = 'ringside_task_blocked' and a.key = 'stalled_ns'"),
            2'900'000'000);

  int code = -1;
  const std::string status = RunRingsideCapture({"status", "--json", "--socket", socket_}, &code);
  ASSERT_EQ(code, 0) << status;
  const nlohmann::json s = nlohmann::json::parse(status);
  bool row = false;
  for (const nlohmann::json& r : s["snapshots"]["triggers"]) {
    if (r["name"] != "stuck") continue;
    row = true;
    EXPECT_EQ(r["fires_on"], "blocked");
    EXPECT_EQ(r["fired"], 1);
  }
  EXPECT_TRUE(row) << status;
}

TEST_F(AgentStallTest, ATaskWaitingForItsCpuBesideThreeHogsFiresRunqueueDelayNamingItAndTheCpu) {
  if (ringside::testing::PreemptRtKernel()) {
    GTEST_SKIP()
        << "real-time spinners would hold this PREEMPT_RT kernel's timer and RCU threads "
           "(of their priority) too; the kernel matrix proves run-queue delays there, in a "
           "throttled cgroup";
  }
  const int cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  const pid_t wakee = ringside::testing::StartSleeper("rskt-wakee", cpu, 20);
  ringside::testing::ScopedProcesses sleeper({wakee});
  // Real-time hogs: a fair task waits for their CPU until the kernel's
  // real-time throttling gives it a share (50 ms a second, by default) on
  // every kernel, where fair hogs would share it within milliseconds.
  ringside::testing::ScopedProcesses hogs(ringside::testing::StartSpinners(3, "rskt-hog", cpu));
  for (pid_t p : hogs.pids()) {
    const sched_param rt{1};
    ASSERT_EQ(sched_setscheduler(p, SCHED_FIFO, &rt), 0);
  }
  const std::vector<std::string> files = AwaitSnapshots(snaps_, "starved", absl::Seconds(20));
  hogs.Stop();
  ASSERT_EQ(files.size(), 1u) << agent_->Log();
  const nlohmann::json j = Inspect(files[0]);
  ASSERT_EQ(j["snapshot_triggers"].size(), 1u) << j.dump();
  const std::string detail = j["snapshot_triggers"][0]["detail"];
  EXPECT_TRUE(absl::StartsWith(detail, absl::StrCat("pid ", wakee, " (rskt-wakee) waited ")))
      << detail;
  EXPECT_TRUE(absl::StrContains(detail, absl::StrCat(" for cpu ", cpu, ", behind "))) << detail;
}

}  // namespace
}  // namespace ringside::agent::testing
