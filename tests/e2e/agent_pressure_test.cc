// Issue 56: a stall fires a snapshot by itself. Tasks of one cgroup waiting
// for a CPU cross the pressure trigger on that cgroup; the kernel wakes the
// agent, which takes one snapshot (then its cooldown holds the rest back),
// and the file shows the stall growing before it, in linux.sys_stats's
// counters, as trace_processor draws them. The cgroup's pressure is its
// own tasks': the machine's (which the agent's own start, or a noisy
// neighbour of this VM, pushes past any threshold now and then) does not
// fire it.

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

// The spinners make their cgroup's "some" CPU pressure near 100% of every
// window: 1.5 s of 2 s.
constexpr char kConfig[] = R"pb(
  buffers { size_kb: 8192 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 256 }
    }
  }
  data_sources {
    config {
      name: "linux.sys_stats"
      sys_stats_config { meminfo_period_ms: 250 psi_period_ms: 250 }
    }
  }
  trigger_config {
    trigger_mode: CLONE_SNAPSHOT
    triggers {
      name: "cpu_stall"
      stop_delay_ms: 500
      cooldown_ms: 600000
      pressure { resource: CPU stall_ms: 1500 window_ms: 2000 cgroups: "CGROUP" }
    }
  }
)pb";

std::vector<std::string> Snapshots(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& f : ListDir(dir)) {
    if (absl::EndsWith(f, ".pftrace") && f[0] != '.') out.push_back(dir + "/" + f);
  }
  return out;
}

TEST(AgentPressureTest, CpuTasksWaitingForACpuFireOneSnapshotThatShowsTheStallGrow) {
  if (geteuid() != 0) GTEST_SKIP() << "the agent needs root";
  if (access("/proc/pressure/cpu", W_OK) != 0) {
    GTEST_SKIP() << "needs the kernel's PSI (/proc/pressure/cpu: CONFIG_PSI, psi=1)";
  }
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  ScratchCgroup cg("stall");
  if (!cg.ok()) GTEST_SKIP() << cg.error();
  ScratchDir dir;
  mkdir(dir.Join("run").c_str(), 0755);
  std::ofstream(dir.Join("agent.pbtxt")) << absl::StrReplaceAll(kConfig, {{"CGROUP", cg.path()}});
  FakeNotifySocket notify(dir.Join("notify.sock"));
  const std::string socket = dir.Join("control.sock"), snaps = dir.Join("snaps");
  AgentProcess agent({"-c", dir.Join("agent.pbtxt"), "--socket", socket, "--run-dir",
                      dir.Join("run"), "--output-dir", snaps},
                     dir.Join("agent.log"), notify.path());
  ASSERT_TRUE(agent.WaitReady(&notify, absl::Seconds(60)).ok()) << agent.Log();
  // The counters of a calm second first, then the stall.
  absl::SleepFor(absl::Seconds(1));
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  ringside::testing::ScopedProcesses spinners(
      ringside::testing::StartSpinners(2 * cpus + 1, "rs-spin", -1, cg.dir() + "/cgroup.procs"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Snapshots(snaps).empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  // Three more windows of stall: the kernel says so each time, the
  // cooldown holds each back.
  absl::SleepFor(absl::Seconds(6));
  spinners.Stop();
  const std::vector<std::string> files = Snapshots(snaps);
  ASSERT_EQ(files.size(), 1u) << agent.Log();
  EXPECT_TRUE(absl::EndsWith(files[0], "-cpu_stall.pftrace")) << files[0];

  int code = -1;
  const std::string status = RunRingsideCapture({"status", "--json", "--socket", socket}, &code);
  ASSERT_EQ(code, 0) << status;
  const nlohmann::json s = nlohmann::json::parse(status);
  EXPECT_EQ(s["pressure"]["watching"], 1) << status;
  EXPECT_GE(s["pressure"]["events"].get<uint64_t>(), 2u) << status;
  bool row = false;
  for (const nlohmann::json& t : s["snapshots"]["triggers"]) {
    if (t["name"] != "cpu_stall") continue;
    row = true;
    EXPECT_EQ(t["fires_on"], "pressure");
    EXPECT_EQ(t["fired"], 1);
    EXPECT_GE(t["suppressed"].get<uint64_t>() + t["joined"].get<uint64_t>(), 1u) << status;
  }
  EXPECT_TRUE(row) << status;
  EXPECT_TRUE(
      absl::StrContains(agent.Log(), absl::StrCat("trigger cpu_stall from the kernel (cpu some >= "
                                                  "1500 ms in 2000 ms of cgroup ",
                                                  cg.path(), ": avg10 ")))
      << agent.Log();

  // The file names what fired it, and holds the stall growing before it.
  const std::string json = RunRingsideCapture({"inspect", "--json", files[0]}, &code);
  ASSERT_EQ(code, 0) << json;
  const nlohmann::json j = nlohmann::json::parse(json);
  ASSERT_EQ(j["snapshot_triggers"].size(), 1u) << json;
  EXPECT_EQ(j["snapshot_triggers"][0]["producer_name"], "psi");
  EXPECT_TRUE(absl::StartsWith(j["snapshot_triggers"][0]["detail"].get<std::string>(),
                               "cpu some >= 1500 ms in 2000 ms of cgroup " + cg.path()))
      << json;
  const uint64_t fired_ns = j["snapshot_triggers"][0]["timestamp_ns"];
  EXPECT_EQ(QueryInt(tp, files[0],
                     "select count(*) from stats where severity = 'error' and "
                     "value > 0"),
            0);
  // psi.cpu.some is the stall time so far: over the second before the
  // trigger it grew by at least half a second a second, two CPUs' worth of
  // waiting tasks (a calm machine grows it by milliseconds). As a rate
  // between the first and last samples of that second: on a loaded machine
  // the samples (every 250 ms) may span only part of it.
  const std::string window = absl::StrCat(
      " from counter c join counter_track t on c.track_id = t.id where t.name = 'psi.cpu.some' "
      "and c.ts <= ",
      fired_ns, " and c.ts >= ", fired_ns - 1'000'000'000);
  ASSERT_GE(QueryInt(tp, files[0], "select count(*)" + window), 2) << window;
  const std::string rate =
      "select cast((max(c.value) - min(c.value)) * 1e9 / (max(c.ts) - min(c.ts)) as int)" + window;
  EXPECT_GE(QueryInt(tp, files[0], rate), 500'000'000) << rate;
  EXPECT_GE(QueryInt(tp, files[0],
                     absl::StrCat("select count(*) from counter c join counter_track t on "
                                  "c.track_id = t.id where t.name = 'MemAvailable' and c.ts < ",
                                  fired_ns)),
            2);
}

}  // namespace
}  // namespace ringside::agent::testing
