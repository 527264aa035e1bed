// `ringside agent` on a machine missing something it uses, as
// record_degraded_test.cc does for `record`: the kernel's BTF, tracefs,
// locked memory. The daemon must not die of it: it says what is missing
// and what that costs, becomes ready with what can still be had, answers
// status, writes a snapshot holding scheduling events and runs of a program
// of the test's own, and stops cleanly.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/degradation.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

class AgentDegradedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to take away what root has";
    mkdir(dir_.Join("run").c_str(), 0755);
    // A copy of /bin/true of this test's own: the agent records the whole
    // machine, where others may run /bin/true meanwhile.
    std::ifstream in("/bin/true", std::ios::binary);
    std::ofstream(true_, std::ios::binary) << in.rdbuf();
    ASSERT_EQ(chmod(true_.c_str(), 0755), 0) << std::strerror(errno);
  }

  // Starts `ringside agent` with its embedded default config, degraded as
  // `d`, and waits for READY=1 (or its exit).
  std::unique_ptr<AgentProcess> StartReady(const Degradation& d) {
    auto agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"--socket", socket(), "--run-dir", dir_.Join("run"),
                                 "--output-dir", dir_.Join("snaps")},
        dir_.Join("agent.log"), notify_.path(), std::vector<std::string>{}, std::nullopt, d);
    ready_ = agent->WaitReady(&notify_, absl::Seconds(60)).ok();
    return agent;
  }

  // Runs the test's true `n` times and waits for each.
  void RunTrue(int n) {
    for (int i = 0; i < n; i++) {
      const pid_t pid = fork();
      if (pid == 0) {
        execl(true_.c_str(), true_.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  struct Snapshot {
    uint64_t switches = 0;
    int execs = 0;  // Of the test's true.
    int trace_stats = 0;
  };

  // Asks for a snapshot and reads it back.
  Snapshot TakeSnapshot() {
    Snapshot s;
    absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("degraded", true));
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return s;
    EXPECT_TRUE(reply->has_snapshot()) << reply->error();
    const trace::Trace t = ReadTraceFile(reply->snapshot().path());
    for (const trace::TracePacket& p : t.packet()) {
      s.trace_stats += p.has_trace_stats();
      s.switches +=
          static_cast<uint64_t>(p.ftrace_events().compact_sched().switch_timestamp_size());
      for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
        s.switches += e.has_sched_switch();
        s.execs += e.sched_process_exec().filename() == true_;
      }
    }
    return s;
  }

  // The running agent records, snapshots and stops cleanly.
  void ExpectItStillWorks(AgentProcess* agent, Snapshot* snapshot) {
    absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_TRUE(status->has_status()) << status->error();
    RunTrue(3);
    absl::SleepFor(absl::Milliseconds(300));
    *snapshot = TakeSnapshot();
    EXPECT_GT(snapshot->switches, 0u);
    EXPECT_EQ(snapshot->execs, 3);
    EXPECT_EQ(snapshot->trace_stats, 1);
    ASSERT_TRUE(agent->Signal(SIGTERM));
    const std::optional<int> exit = agent->WaitExit(absl::Seconds(30));
    ASSERT_TRUE(exit.has_value()) << agent->Log();
    EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << *exit << "\n" << agent->Log();
  }

  std::string socket() const { return dir_.Join("control.sock"); }

  ScratchDir dir_;
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  std::string true_ = dir_.Join("degraded-true");
  bool ready_ = false;
};

// No BTF: the BPF programs cannot load; the default config's ftrace source
// records scheduling and process events in their place.
TEST_F(AgentDegradedTest, WithoutBtfFtraceRecordsSchedulingInsteadOfBpf) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "this kernel has no BTF anyway";
  std::unique_ptr<AgentProcess> agent = StartReady(HideBtf());
  ASSERT_TRUE(ready_) << "no READY=1; the agent said:\n" << agent->Log();
  const std::string log = agent->Log();
  EXPECT_TRUE(absl::StrContains(log, "linux.bpf disabled")) << log;
  EXPECT_TRUE(absl::StrContains(log, "no BTF (/sys/kernel/btf/vmlinux)")) << log;
  Snapshot s;
  ExpectItStillWorks(agent.get(), &s);
}

// No BTF, so no BPF incident programs: the default config's crash trigger
// still fires, on ftrace's signal/signal_deliver in their place, and its
// snapshot holds the crash (issue 32: kernels without BTF, BPF locked down).
TEST_F(AgentDegradedTest, WithoutBtfACrashStillTakesItsSnapshotThroughFtrace) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "this kernel has no BTF anyway";
  std::unique_ptr<AgentProcess> agent = StartReady(HideBtf());
  ASSERT_TRUE(ready_) << "no READY=1; the agent said:\n" << agent->Log();
  EXPECT_TRUE(absl::StrContains(agent->Log(),
                                "linux.ftrace: reporting OOM kills and fatal signals with "
                                "oom/mark_victim and signal/signal_deliver in place of BPF's "
                                "incident programs"))
      << agent->Log();
  EXPECT_FALSE(absl::StrContains(agent->Log(), "answers requests by name only")) << agent->Log();
  const std::vector<pid_t> crashed = ringside::testing::Crash(1, "rs-ft-crash");
  ASSERT_EQ(crashed.size(), 1u);
  // The default trigger writes its snapshot a second after the crash.
  std::string path;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (path.empty() && absl::Now() < deadline) {
    for (const std::string& name : ListDir(dir_.Join("snaps"))) {
      if (absl::EndsWith(name, "-crash.pftrace")) path = dir_.Join("snaps") + "/" + name;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_FALSE(path.empty()) << "no crash snapshot; the agent said:\n" << agent->Log();
  // The crash itself: the SIGSEGV its task took with the default action.
  int delivered = 0;
  const trace::Trace t = ReadTraceFile(path);
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (!e.has_generic() || e.generic().event_name() != "signal_deliver") continue;
      if (static_cast<pid_t>(e.pid()) != crashed[0]) continue;
      for (const auto& f : e.generic().field())
        delivered += f.name() == "sig" && f.int_value() == 11;
    }
  }
  EXPECT_EQ(delivered, 1) << path;
  ASSERT_TRUE(agent->Signal(SIGTERM));
  const std::optional<int> exit = agent->WaitExit(absl::Seconds(30));
  ASSERT_TRUE(exit.has_value()) << agent->Log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << *exit << "\n" << agent->Log();
}

// tracefs neither mounted nor mountable: the ftrace source is disabled,
// naming why; BPF, which needs no tracefs, records everything else.
TEST_F(AgentDegradedTest, WithoutTracefsBpfStillRecordsAndFtraceIsNamed) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "BPF here needs the kernel's BTF";
  std::unique_ptr<AgentProcess> agent = StartReady(NoTracefs());
  ASSERT_TRUE(ready_) << "no READY=1; the agent said:\n" << agent->Log();
  const std::string log = agent->Log();
  EXPECT_TRUE(absl::StrContains(log, "linux.ftrace disabled")) << log;
  EXPECT_TRUE(absl::StrContains(log, "tracefs is not mounted")) << log;
  EXPECT_FALSE(absl::StrContains(log, "linux.bpf disabled")) << log;
  Snapshot s;
  ExpectItStillWorks(agent.get(), &s);
}

// A 64 KiB RLIMIT_MEMLOCK. Since 5.11 BPF maps are charged to the memory
// cgroup, not to RLIMIT_MEMLOCK, so this records as usual; a kernel that
// still counted them would disable linux.bpf naming the limit.
TEST_F(AgentDegradedTest, ATinyMemlockLimitRecordsOrNamesTheLimit) {
  std::unique_ptr<AgentProcess> agent = StartReady(MemlockLimit(65536));
  ASSERT_TRUE(ready_) << "no READY=1; the agent said:\n" << agent->Log();
  const std::string log = agent->Log();
  if (absl::StrContains(log, "linux.bpf disabled")) {
    EXPECT_TRUE(absl::StrContains(log, "RLIMIT_MEMLOCK")) << log;
  }
  Snapshot s;
  ExpectItStillWorks(agent.get(), &s);
}

}  // namespace
}  // namespace ringside::agent::testing
