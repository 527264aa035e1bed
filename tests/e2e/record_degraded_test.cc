// `ringside record` on a machine missing something it uses: the kernel's
// BTF, tracefs, locked memory, a CPU that goes away and comes back. Each
// time: a line naming what is missing and what it costs, and a recording
// of what can still be had. (Without privilege at all:
// RecordCommandTest.WithoutPrivilegeSaysWhatIsMissingAndRecordsProc.)

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/config/defaults.h"
#include "buffer/chunk_abi.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/degradation.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/cpu_offline.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"
#include "tests/testing/root_only_dir.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

using testing::Degradation;
using testing::HideBtf;
using testing::MemlockLimit;
using testing::NoTracefs;
using testing::ReadTraceFile;
using testing::TempPath;

struct RecordRun {
  int exit_code = -1;  // 100+: the child could not set up the degradation.
  std::string stderr_text;
};

// Runs build/ringside ARGS in a child degraded as `d`.
RecordRun RecordDegraded(const Degradation& d, const std::vector<std::string>& args) {
  // Built before fork(): the child of a threaded process makes only system
  // calls until it execs.
  const std::string binary = ringside::testing::RingsideBinary();
  std::vector<std::string> arg_strings = {binary};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string err_path = TempPath(absl::StrCat("degraded-", getpid(), ".stderr"));
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t pid = fork();
  if (pid == 0) {
    if (err_fd < 0 || dup2(err_fd, STDERR_FILENO) < 0) _exit(100);
    if (const int failed = testing::ApplyInChild(d); failed != 0) _exit(failed);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  if (err_fd >= 0) close(err_fd);
  RecordRun run;
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  std::ifstream in(err_path);
  run.stderr_text = std::string(std::istreambuf_iterator<char>(in), {});
  unlink(err_path.c_str());
  return run;
}

struct Recorded {
  uint64_t switches = 0;
  int execs = 0;  // Of `program`.
  int trace_stats = 0;
};

Recorded Summarize(const trace::Trace& t, const std::string& program) {
  Recorded r;
  for (const trace::TracePacket& p : t.packet()) {
    r.trace_stats += p.has_trace_stats();
    r.switches += static_cast<uint64_t>(p.ftrace_events().compact_sched().switch_timestamp_size());
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      r.switches += e.has_sched_switch();
      r.execs += e.sched_process_exec().filename() == program;
    }
  }
  return r;
}

class RecordDegradedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to take away what root has";
    // A copy of /bin/true of this test's own: the recording is of the
    // whole machine, where others may run /bin/true meanwhile.
    std::ifstream in("/bin/true", std::ios::binary);
    std::ofstream(true_, std::ios::binary) << in.rdbuf();
    ASSERT_EQ(chmod(true_.c_str(), 0755), 0) << std::strerror(errno);
  }
  void TearDown() override {
    unlink(out_.c_str());
    unlink(true_.c_str());
  }
  // `record` while a shell runs our true three times.
  std::vector<std::string> RecordArgs() const {
    return {"record",
            "-o",
            out_,
            "--",
            "/bin/sh",
            "-c",
            absl::StrCat("for i in 1 2 3; do ", true_, "; done; sleep 0.2")};
  }
  std::string out_ = TempPath("degraded.pftrace");
  std::string true_ = TempPath("degraded-true");
};

// No BTF: the BPF programs cannot load; the default config's ftrace source
// records scheduling and process events in their place.
TEST_F(RecordDegradedTest, WithoutBtfFtraceRecordsSchedulingInsteadOfBpf) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "this kernel has no BTF anyway";
  const RecordRun run = RecordDegraded(HideBtf(), RecordArgs());
  ASSERT_LT(run.exit_code, 100) << "cannot hide /sys/kernel/btf in a mount namespace";
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "linux.bpf disabled")) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "no BTF (/sys/kernel/btf/vmlinux)"))
      << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "sched/sched_switch")) << run.stderr_text;
  // With no BPF rings, ftrace's buffers take their share of the budget.
  const uint32_t alone_kb = StagingSharesFor(kDefaultStagingBudgetKb, PossibleCpus(),
                                             FtraceShare::kAlone, buffer::kMinChunkSize)
                                .ftrace_buffer_kb;
  EXPECT_TRUE(absl::StrContains(
      run.stderr_text, absl::StrCat("share of staging_budget_kb as well: ", alone_kb, " KiB each")))
      << run.stderr_text;
  const Recorded r = Summarize(ReadTraceFile(out_), true_);
  EXPECT_GT(r.switches, 0u);
  EXPECT_EQ(r.execs, 3);
  EXPECT_EQ(r.trace_stats, 1);
}

// No BTF at /sys/kernel/btf/vmlinux, but the kernel's BTF as a file
// (bpf_config.btf_path), as on a kernel built without CONFIG_DEBUG_INFO_BTF:
// the programs run as raw tracepoints relocated against it, and record what
// the tp_btf ones do (issue 32).
TEST_F(RecordDegradedTest, WithoutBtfAnExternalBtfFileRunsBpfAsRawTracepoints) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "no BTF to copy";
  // Only a file of root's, in directories only root can write, is read.
  const ringside::testing::RootOnlyDir dir;
  if (dir.path().empty()) GTEST_SKIP() << dir.why();
  const std::string btf = dir.Path("vmlinux.btf");
  {
    std::ifstream in("/sys/kernel/btf/vmlinux", std::ios::binary);
    std::ofstream(btf, std::ios::binary) << in.rdbuf();
  }
  ASSERT_EQ(chmod(btf.c_str(), 0644), 0);
  const std::string config = TempPath("degraded-btf.pbtxt");
  std::ofstream(config) << "buffers { size_kb: 16384 }\n"
                        << "data_sources { config { name: \"linux.bpf\" bpf_config { btf_path: \""
                        << btf << "\" } } }\n";
  std::vector<std::string> args = RecordArgs();
  args.insert(args.begin() + 1, {"-c", config});
  const RecordRun run = RecordDegraded(HideBtf(), args);
  unlink(config.c_str());
  ASSERT_LT(run.exit_code, 100) << "cannot hide /sys/kernel/btf in a mount namespace";
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "programs run as raw tracepoints"))
      << run.stderr_text;
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "linux.bpf disabled")) << run.stderr_text;
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "cannot run on this kernel")) << run.stderr_text;
  // The raw flavours load as one object too.
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "loaded one group at a time")) << run.stderr_text;
  // Only linux.bpf in the config: the switches and our execs are its own.
  const trace::Trace t = ReadTraceFile(out_);
  const Recorded r = Summarize(t, true_);
  EXPECT_GT(r.switches, 0u);
  EXPECT_EQ(r.execs, 3);
  // The raw flavours read the tasks right, not just something: each exec's
  // pid is one the switches ran, and the switches name their tasks.
  std::set<int32_t> exec_pids, next_pids;
  size_t named = 0;
  for (const trace::TracePacket& p : t.packet()) {
    const trace::FtraceEventBundle::CompactSched& cs = p.ftrace_events().compact_sched();
    next_pids.insert(cs.switch_next_pid().begin(), cs.switch_next_pid().end());
    for (const std::string& comm : cs.intern_table()) named += !comm.empty();
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.sched_process_exec().filename() == true_)
        exec_pids.insert(e.sched_process_exec().pid());
    }
  }
  EXPECT_EQ(exec_pids.size(), 3u);
  for (int32_t pid : exec_pids) {
    EXPECT_GT(pid, 0);
    EXPECT_EQ(next_pids.count(pid), 1u) << "exec'd pid " << pid << " never switched in";
  }
  EXPECT_GT(named, 0u) << "no switch names its task";
}

// A kernel that has its own BTF uses it and never reads btf_path: one
// config serves machines with and without BTF, even where the file is not.
TEST_F(RecordDegradedTest, WithBtfABtfPathIsNotRead) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "this kernel has no BTF";
  const std::string config = TempPath("degraded-btf.pbtxt");
  std::ofstream(config) << "buffers { size_kb: 16384 }\n"
                        << "data_sources { config { name: \"linux.bpf\" bpf_config { btf_path: \""
                        << TempPath("degraded-no-such.btf") << "\" } } }\n";
  std::vector<std::string> args = RecordArgs();
  args.insert(args.begin() + 1, {"-c", config});
  const RecordRun run = RecordDegraded(Degradation{}, args);
  unlink(config.c_str());
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "btf_path")) << run.stderr_text;
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "raw tracepoints")) << run.stderr_text;
  EXPECT_EQ(Summarize(ReadTraceFile(out_), true_).execs, 3);
}

// A btf_path that is not a kernel's BTF, or not there, is named; the
// recording goes on without BPF.
TEST_F(RecordDegradedTest, WithoutBtfABtfPathThatIsNoKernelsBtfIsNamed) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "this kernel has no BTF anyway";
  const ringside::testing::RootOnlyDir dir;
  if (dir.path().empty()) GTEST_SKIP() << dir.why();
  const std::string config = TempPath("degraded-btf.pbtxt");
  // A copy of the kernel's BTF where others could replace it: /tmp itself
  // (sticky, 01777), whatever TEST_TMPDIR the test's own files go to.
  char in_tmp_name[] = "/tmp/degraded-vmlinux-XXXXXX.btf";
  const int in_tmp_fd = mkstemps(in_tmp_name, 4);
  ASSERT_GE(in_tmp_fd, 0) << strerror(errno);
  close(in_tmp_fd);
  const std::string in_tmp = in_tmp_name;
  {
    std::ifstream in("/sys/kernel/btf/vmlinux", std::ios::binary);
    std::ofstream(in_tmp, std::ios::binary) << in.rdbuf();
  }
  std::vector<std::pair<std::string, std::string>> cases = {
      {"/usr/bin/true", "not a kernel's BTF"},
      {dir.Path("no-such.btf"), "no such file"},
      {in_tmp, "/tmp is writable by others"}};
  // A minimised BTF (what BTFHub's tools make for one program): the types
  // the programs read, but not the tracepoints'.
  const std::string min_btf = dir.Path("min.btf");
  if (std::system(absl::StrCat("bpftool gen min_core_btf /sys/kernel/btf/vmlinux ", min_btf, " ",
                               ringside::testing::BuildDir(), "/bpf/sched.bpf.o")
                      .c_str()) == 0) {
    // Root's and writable by root alone whatever the umask: refused for
    // what it holds, not for its mode.
    ASSERT_EQ(chmod(min_btf.c_str(), 0644), 0);
    cases.push_back({min_btf, "has no tracepoint types"});
  } else {
    ADD_FAILURE() << "bpftool gen min_core_btf failed (make deps installs bpftool)";
  }
  for (const auto& [path, why] : cases) {
    std::ofstream(config) << "buffers { size_kb: 4096 }\n"
                          << "data_sources { config { name: \"linux.bpf\" bpf_config { "
                          << "btf_path: \"" << path << "\" } } }\n"
                          << "data_sources { config { name: \"linux.ftrace\" ftrace_config { "
                          << "ftrace_events: \"sched/sched_switch\" } } }\n";
    const RecordRun run =
        RecordDegraded(HideBtf(), {"record", "-c", config, "-t", "300ms", "-o", out_});
    ASSERT_LT(run.exit_code, 100) << "cannot hide /sys/kernel/btf in a mount namespace";
    EXPECT_EQ(run.exit_code, 0) << run.stderr_text;
    EXPECT_TRUE(absl::StrContains(run.stderr_text, absl::StrCat("linux.bpf disabled: "
                                                                "bpf_config.btf_path ",
                                                                path, ": ", why)))
        << run.stderr_text;
    EXPECT_GT(Summarize(ReadTraceFile(out_), true_).switches, 0u) << path;
  }
  unlink(config.c_str());
  unlink(in_tmp.c_str());
}

// tracefs neither mounted nor mountable: the ftrace source is disabled,
// naming why; BPF, which needs no tracefs, records everything else.
TEST_F(RecordDegradedTest, WithoutTracefsBpfStillRecordsAndFtraceIsNamed) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "BPF here needs the kernel's BTF";
  const RecordRun run = RecordDegraded(NoTracefs(), RecordArgs());
  ASSERT_LT(run.exit_code, 100) << "cannot take tracefs away in a mount namespace";
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "linux.ftrace disabled")) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "tracefs is not mounted")) << run.stderr_text;
  EXPECT_FALSE(absl::StrContains(run.stderr_text, "linux.bpf disabled")) << run.stderr_text;
  const Recorded r = Summarize(ReadTraceFile(out_), true_);
  EXPECT_GT(r.switches, 0u);
  EXPECT_EQ(r.execs, 3);
  EXPECT_EQ(r.trace_stats, 1);
}

// A 64 KiB RLIMIT_MEMLOCK. Since 5.11 BPF maps are charged to the memory
// cgroup, not to RLIMIT_MEMLOCK, so this records as usual; a kernel that
// still counted them would disable linux.bpf naming the limit.
TEST_F(RecordDegradedTest, ATinyMemlockLimitRecordsOrNamesTheLimit) {
  const RecordRun run = RecordDegraded(MemlockLimit(65536), RecordArgs());
  ASSERT_LT(run.exit_code, 100) << "cannot set RLIMIT_MEMLOCK";
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  if (absl::StrContains(run.stderr_text, "linux.bpf disabled")) {
    EXPECT_TRUE(absl::StrContains(run.stderr_text, "RLIMIT_MEMLOCK")) << run.stderr_text;
  }
  const Recorded r = Summarize(ReadTraceFile(out_), true_);
  EXPECT_GT(r.switches, 0u);
  EXPECT_EQ(r.execs, 3);
  EXPECT_EQ(r.trace_stats, 1);
}

using ::ringside::testing::CpuOffline;

int64_t BootTimeNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct CpuEvents {
  uint64_t cpu1_before = 0;     // On CPU 1 before it went offline.
  uint64_t cpu1_after = 0;      // On CPU 1 after it came back.
  uint64_t cpu0_while_off = 0;  // On CPU 0 meanwhile.
  int trace_stats = 0;
};

CpuEvents CountCpuEvents(const trace::Trace& t, int64_t offline_ns, int64_t online_ns) {
  CpuEvents c;
  for (const trace::TracePacket& p : t.packet()) {
    c.trace_stats += p.has_trace_stats();
    if (!p.has_ftrace_events()) continue;
    const uint32_t cpu = p.ftrace_events().cpu();
    auto count = [&](int64_t ts) {
      if (cpu == 1 && ts < offline_ns) c.cpu1_before++;
      if (cpu == 1 && ts > online_ns) c.cpu1_after++;
      if (cpu == 0 && ts > offline_ns && ts < online_ns) c.cpu0_while_off++;
    };
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      count(static_cast<int64_t>(e.timestamp()));
    }
    int64_t ts = 0;
    for (uint64_t delta : p.ftrace_events().compact_sched().switch_timestamp()) {
      ts += static_cast<int64_t>(delta);
      count(ts);
    }
  }
  return c;
}

class CpuHotplugTest : public RecordDegradedTest {
 protected:
  void SetUp() override {
    RecordDegradedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    RINGSIDE_REQUIRE_TRACEFS();
    if (access(kOnline, W_OK) != 0) {
      GTEST_SKIP() << kOnline << " cannot be written here: CPU 1 cannot be taken offline";
    }
    std::ifstream in(kOnline);
    std::string v;
    in >> v;
    if (v != "1") GTEST_SKIP() << "CPU 1 is not online to begin with";
  }
  static constexpr char kOnline[] = "/sys/devices/system/cpu/cpu1/online";
};

// CPU 1 goes offline during a recording and comes back: the recording goes
// on on CPU 0 meanwhile, says when CPU 1 went and came back, ends whole,
// and CPU 1's events are there again after it came back.
//
// The recording lasts until 1.5 s after CPU 1 is back (its command waits for
// the test's gate file), not a fixed time: bringing a CPU online can take the
// kernel a minute on a loaded VM, and a recording that ended before would
// have nothing to say about the CPU's return.
TEST_F(CpuHotplugTest, ACpuGoingOfflineAndOnlineWhileRecording) {
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(1);
  const std::string gate = out_ + ".back";
  RecordRun run;
  std::thread recorder([&] {
    run = RecordDegraded(
        Degradation(),
        {"record", "--duration", "300s", "-o", out_, "--", "/bin/sh", "-c",
         absl::StrCat("while [ ! -e '", gate, "' ]; do sleep 0.1; done; sleep 1.5")});
  });
  int64_t offline_ns = 0, online_ns = 0;
  bool offline = false, online = false;
  {
    CpuOffline cpu1(1);
    absl::SleepFor(absl::Milliseconds(1500));
    offline_ns = BootTimeNs();
    offline = cpu1.Offline();
    // Two of the recording's once-a-second looks at the online CPUs, so
    // that one sees it gone even if its owner thread runs late.
    absl::SleepFor(absl::Milliseconds(2200));
    online = cpu1.Online();
    online_ns = BootTimeNs();
  }
  std::ofstream(gate).put('\n');
  recorder.join();
  unlink(gate.c_str());
  ringside::testing::StopProcesses(storm);
  ASSERT_TRUE(offline) << "writing 0 to " << kOnline;
  ASSERT_TRUE(online) << "writing 1 to " << kOnline;
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "CPU 1 went offline")) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "CPU 1 came online")) << run.stderr_text;
  const CpuEvents c = CountCpuEvents(ReadTraceFile(out_), offline_ns, online_ns);
  EXPECT_EQ(c.trace_stats, 1);
  EXPECT_GT(c.cpu1_before, 0u);
  EXPECT_GT(c.cpu0_while_off, 0u);
  EXPECT_GT(c.cpu1_after, 0u) << "nothing recorded on CPU 1 after it came back online";
}

// CPU 1 goes offline (for two of the once-a-second checks, so that one
// sees it gone) and comes back just before the recording ends (its command
// ends right after): the notices still end with it back, whenever the last
// check ran. Before the session looked once more as it stopped, this was
// the flake of the test above when CPU 1 came back in the recording's last
// second.
TEST_F(CpuHotplugTest, ACpuBackJustBeforeTheEndIsTold) {
  const std::string script =
      absl::StrCat("echo 0 > ", kOnline, " && sleep 2.5 && echo 1 > ", kOnline);
  const RecordRun run =
      RecordDegraded(Degradation(), {"record", "-o", out_, "--", "sh", "-c", script});
  // As SetUp found it, whatever the command managed.
  std::ofstream(kOnline) << "1";
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "CPU 1 went offline")) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "CPU 1 came online")) << run.stderr_text;
}

// CPU 1 offline when the recording starts and online during it, with
// ftrace recording scheduling (BTF hidden): its ftrace reader is opened
// once it is there, and its events are recorded from then on.
TEST_F(CpuHotplugTest, ACpuOfflineAtTheStartIsRecordedOnceItComesOnline) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "no BTF to hide";
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(1);
  RecordRun run;
  int64_t asked_online_ns = 0, online_ns = 0;
  bool offline = false, online = false;
  {
    CpuOffline cpu1(1);
    offline = cpu1.Offline();
    std::thread recorder([&] {
      run = RecordDegraded(HideBtf(), {"record", "--duration", "4s", "-o", out_});
    });
    absl::SleepFor(absl::Milliseconds(1500));
    asked_online_ns = BootTimeNs();
    online = cpu1.Online();
    online_ns = BootTimeNs();
    recorder.join();
  }
  ringside::testing::StopProcesses(storm);
  ASSERT_TRUE(offline) << "writing 0 to " << kOnline;
  ASSERT_TRUE(online) << "writing 1 to " << kOnline;
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "linux.bpf disabled")) << run.stderr_text;
  EXPECT_TRUE(absl::StrContains(run.stderr_text, "CPU 1 came online")) << run.stderr_text;
  // Nothing on CPU 1 before it was asked to come online (it runs before the
  // write returns).
  const CpuEvents c = CountCpuEvents(ReadTraceFile(out_), asked_online_ns, online_ns);
  EXPECT_EQ(c.trace_stats, 1);
  EXPECT_EQ(c.cpu1_before, 0u);
  EXPECT_GT(c.cpu1_after, 0u) << "nothing recorded on CPU 1 after it came online";
}

}  // namespace
}  // namespace ringside::agent
