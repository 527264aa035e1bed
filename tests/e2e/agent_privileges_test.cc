// `ringside agent` on the real kernel gives up its privileges once it has
// loaded and attached its programs and opened tracefs: every thread keeps
// only what recording still needs, no_new_privs is set, and recording,
// snapshots, status and the clean-up at stop all still work.

#include <grp.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/lifecycle/open_file_limit.h"
#include "agent/lifecycle/privileges.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

constexpr char kConfig[] = R"pb(
  buffers { size_kb: 4096 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 256 }
    }
  }
  data_sources {
    config {
      name: "linux.ftrace"
      ftrace_config { ftrace_events: "sched/sched_wakeup" }
    }
  }
)pb";

// The name of the tracefs instance the agent holds open ("" if none).
std::string AgentInstance(pid_t pid) {
  const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
  for (const std::string& fd : ListDir(fd_dir)) {
    char target[4096];
    const ssize_t n = readlink((fd_dir + "/" + fd).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string path(target, static_cast<size_t>(n));
    const size_t at = path.find("/instances/ringside-");
    if (at == std::string::npos || absl::EndsWith(path, " (deleted)")) continue;
    const std::string rest = path.substr(at + strlen("/instances/"));
    return rest.substr(0, rest.find('/'));
  }
  return "";
}

uint64_t SourceEvents(const nlohmann::json& status, const std::string& name) {
  for (const nlohmann::json& s : status["sources"]) {
    if (s["name"] == name) return s["events"].get<uint64_t>();
  }
  return 0;
}

class AgentPrivilegesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    RINGSIDE_REQUIRE_TRACEFS();
    mkdir(dir_.Join("run").c_str(), 0755);
  }
  std::unique_ptr<AgentProcess> StartReady(const std::string& config_text) {
    const std::string config = dir_.Join("agent.pbtxt");
    EXPECT_TRUE(WriteTextFile(config, config_text));
    auto agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"-c", config, "--socket", socket(), "--run-dir", dir_.Join("run"),
                                 "--output-dir", out_},
        dir_.Join("agent.log"), notify_.path());
    const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
    EXPECT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
    return agent;
  }
  nlohmann::json Status() {
    int code = -1;
    const std::string text = RunRingsideCapture({"status", "--json", "--socket", socket()}, &code);
    EXPECT_EQ(code, 0);
    return code == 0 ? nlohmann::json::parse(text) : nlohmann::json::object();
  }
  // Every thread of the agent holds exactly `keep` and has no_new_privs.
  void ExpectEveryThreadHolds(pid_t pid, CapabilityMask keep) {
    absl::StatusOr<std::vector<ThreadCapabilities>> threads = ReadThreadCapabilities(pid);
    ASSERT_TRUE(threads.ok()) << threads.status();
    // The main, control, snapshot, buffer-owner and sources' threads.
    EXPECT_GE(threads->size(), 5u);
    for (const ThreadCapabilities& t : *threads) {
      EXPECT_EQ(t.effective, keep) << "thread " << t.tid << ": " << CapabilityNames(t.effective);
      EXPECT_EQ(t.permitted, keep) << "thread " << t.tid << ": " << CapabilityNames(t.permitted);
      EXPECT_EQ(t.inheritable, 0u) << "thread " << t.tid;
      EXPECT_EQ(t.ambient, 0u) << "thread " << t.tid;
      EXPECT_TRUE(t.no_new_privs) << "thread " << t.tid;
    }
  }
  std::string socket() const { return dir_.Join("control.sock"); }

  ScratchDir dir_;
  std::string out_ = dir_.Join("out");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
};

TEST_F(AgentPrivilegesTest, AfterSetupNoThreadHoldsACapabilityAndRecordingGoesOn) {
  std::unique_ptr<AgentProcess> agent = StartReady(kConfig);
  const CapabilityMask keep = CapabilitiesToKeepHere(/*output_group=*/false);
  ExpectEveryThreadHolds(agent->pid(), keep);
  if (CapabilitiesToKeepHere(false) == 0) {
    EXPECT_TRUE(absl::StrContains(agent->Log(), "capabilities dropped (kept: none)"))
        << agent->Log();
  }
  const std::string instance = AgentInstance(agent->pid());
  EXPECT_FALSE(instance.empty()) << "the agent holds no tracefs instance open";

  // Both kinds of source keep delivering after the drop, and the control
  // socket still answers.
  const nlohmann::json before = Status();
  ringside::testing::StopProcesses(ringside::testing::StartPipeStorm(2));
  for (int i = 0; i < 20; ++i) {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    if (child > 0) waitpid(child, nullptr, 0);
  }
  // A reader of quiet rings passes once a second (DrainWait): waited for,
  // not slept on.
  nlohmann::json after = Status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline &&
         (SourceEvents(after, "linux.bpf") <= SourceEvents(before, "linux.bpf") ||
          SourceEvents(after, "linux.ftrace") <= SourceEvents(before, "linux.ftrace"))) {
    absl::SleepFor(absl::Milliseconds(100));
    after = Status();
  }
  EXPECT_GT(SourceEvents(after, "linux.bpf"), SourceEvents(before, "linux.bpf")) << after.dump();
  EXPECT_GT(SourceEvents(after, "linux.ftrace"), SourceEvents(before, "linux.ftrace"))
      << after.dump();

  int code = -1;
  const std::string snapshot =
      RunRingsideCapture({"snapshot", "--wait", "--socket", socket()}, &code);
  ASSERT_EQ(code, 0) << agent->Log();
  struct stat st;
  ASSERT_EQ(stat(std::string(absl::StripAsciiWhitespace(snapshot)).c_str(), &st), 0) << snapshot;
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Stopping needs no privilege either: the instance goes, the exit is clean.
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  const std::optional<int> exit_status = agent->WaitExit(absl::Seconds(30));
  ASSERT_TRUE(exit_status.has_value());
  EXPECT_TRUE(WIFEXITED(*exit_status) && WEXITSTATUS(*exit_status) == 0) << agent->Log();
  if (!instance.empty()) {
    const std::string left =
        absl::StrCat(ftrace::testing::KernelTracefs()->root(), "/instances/", instance);
    EXPECT_NE(access(left.c_str(), F_OK), 0) << left << " was left behind";
  }
  EXPECT_FALSE(absl::StrContains(agent->Log(), "error")) << agent->Log();
}

TEST_F(AgentPrivilegesTest, WithAnOutputGroupOnlyChownIsKeptAndFilesGetTheGroup) {
  const group* daemon_group = getgrnam("daemon");
  if (daemon_group == nullptr) GTEST_SKIP() << "this machine has no group 'daemon'";
  const gid_t gid = daemon_group->gr_gid;
  std::unique_ptr<AgentProcess> agent =
      StartReady(absl::StrCat(kConfig, "output_group: \"daemon\"\n"));
  const CapabilityMask keep = CapabilitiesToKeepHere(/*output_group=*/true);
  EXPECT_NE(keep & CapabilityBit(CAP_CHOWN), 0u);
  ExpectEveryThreadHolds(agent->pid(), keep);

  // The snapshot thread chowns what it writes with the one capability kept.
  int code = -1;
  const std::string snapshot =
      RunRingsideCapture({"snapshot", "--wait", "--socket", socket()}, &code);
  ASSERT_EQ(code, 0) << agent->Log();
  struct stat st;
  ASSERT_EQ(stat(std::string(absl::StripAsciiWhitespace(snapshot)).c_str(), &st), 0) << snapshot;
  EXPECT_EQ(st.st_gid, gid);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());
}

// The soft limit of open files of `pid` (/proc/PID/limits), 0 if unread.
rlim_t SoftOpenFileLimit(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/limits"));
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "Max open files")) continue;
    const std::vector<std::string> fields =
        absl::StrSplit(line.substr(strlen("Max open files")), ' ', absl::SkipEmpty());
    uint64_t soft = 0;
    return !fields.empty() && absl::SimpleAtoi(fields[0], &soft) ? soft : 0;
  }
  return 0;
}

// Started as systemd starts a service (a soft limit of 1024 open files),
// the agent raises its own to the hard limit (up to kAgentOpenFiles), so
// that linux.process_stats keeps the statm of more than 256 processes open.
TEST_F(AgentPrivilegesTest, StartedUnderSystemdsLimitOfOpenFilesTheAgentRaisesIt) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max <= 1024) GTEST_SKIP() << "a hard limit of " << saved.rlim_max;
  rlimit low = saved;
  low.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::unique_ptr<AgentProcess> agent = StartReady(
      absl::StrCat(kConfig, "data_sources { config { name: \"linux.process_stats\" } }\n"));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(SoftOpenFileLimit(agent->pid()), std::min(saved.rlim_max, kAgentOpenFiles))
      << agent->Log();
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());
}

}  // namespace
}  // namespace ringside::agent::testing
