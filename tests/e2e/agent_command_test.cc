// `ringside agent` on the real kernel: readiness, status, snapshots, signals,
// reload, one agent per machine, and what it leaves behind.

#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/open_gate.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

// Small buffers: the tests need seconds of recording, not the default 64 MiB.
constexpr char kConfig[] = R"pb(
  buffers { size_kb: 8192 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 256 }
    }
  }
  durable_buffer_size_kb: 1024
)pb";

// BPF links the process holds (the programs it attached).
int BpfLinks(pid_t pid) {
  int links = 0;
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  for (const std::string& fd : ListDir(dir)) {
    char target[256] = {};
    if (readlink((dir + "/" + fd).c_str(), target, sizeof(target) - 1) > 0 &&
        absl::StrContains(target, "bpf_link")) {
      links++;
    }
  }
  return links;
}

// The ids of the BPF programs the process holds (from its fds' fdinfo).
std::vector<uint32_t> BpfProgramIds(pid_t pid) {
  std::vector<uint32_t> ids;
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  for (const std::string& fd : ListDir(dir)) {
    char target[256] = {};
    if (readlink((dir + "/" + fd).c_str(), target, sizeof(target) - 1) <= 0 ||
        !absl::StrContains(target, "bpf-prog")) {
      continue;
    }
    std::ifstream info(absl::StrCat("/proc/", pid, "/fdinfo/", fd));
    std::string line;
    while (std::getline(info, line)) {
      uint32_t id = 0;
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, "prog_id:") &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &id)) {
        ids.push_back(id);
      }
    }
  }
  return ids;
}

// True while the kernel still has the BPF program `id` loaded.
bool BpfProgramLoaded(uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return errno != ENOENT;
  close(fd);
  return true;
}

class AgentCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    config_ = dir_.Join("agent.pbtxt");
    ASSERT_TRUE(WriteTextFile(config_, kConfig));
    mkdir(dir_.Join("run").c_str(), 0755);
  }

  std::vector<std::string> Args(const std::string& output_dir = "") const {
    return {"-c",           config_,
            "--socket",     socket(),
            "--run-dir",    dir_.Join("run"),
            "--output-dir", output_dir.empty() ? dir_.Join("snaps") : output_dir};
  }
  std::string socket() const { return dir_.Join("control.sock"); }

  // Starts an agent and waits for READY=1.
  std::unique_ptr<AgentProcess> StartReady(const std::vector<std::string>& args,
                                           std::vector<std::string>* notifications = nullptr,
                                           const std::vector<std::string>& env = {}) {
    auto agent = std::make_unique<AgentProcess>(
        args, dir_.Join(absl::StrCat("agent", n_++, ".log")), notify_.path(), env);
    std::vector<std::string> got =
        notify_.ReceiveUntil("READY=1", absl::Seconds(60), [&] { return agent->Exited(); });
    if (notifications != nullptr) *notifications = got;
    EXPECT_FALSE(got.empty()) << "no READY=1; the agent said:\n" << agent->Log();
    return agent;
  }

  // A `snapshot --wait` asked on another thread, its file's open(2) held
  // by a gate on output_dir (a slow disk): outstanding until the test
  // releases the gate.
  struct HeldWait {
    std::unique_ptr<OpenGate> gate;  // Null if it could not be set up.
    std::string path;                // The held file's.
    std::future<absl::StatusOr<control::Reply>> reply;
  };
  HeldWait AskHeldWait(const AgentProcess& agent, const std::string& reason) {
    HeldWait held;
    // The agent made it at its start.
    absl::StatusOr<std::unique_ptr<OpenGate>> gate =
        OpenGate::Create(dir_.Join("snaps"), agent.pid());
    if (!gate.ok()) {
      ADD_FAILURE() << gate.status();
      return held;
    }
    held.reply = std::async(std::launch::async, [this, reason] {
      return Ask(socket(), SnapshotRequest(reason, /*wait=*/true), absl::Seconds(60));
    });
    const absl::StatusOr<std::string> path = (*gate)->WaitHeld(absl::Seconds(30));
    if (!path.ok()) {
      ADD_FAILURE() << path.status() << agent.Log();
      return held;
    }
    held.path = *path;
    held.gate = std::move(*gate);
    return held;
  }

  ScratchDir dir_;
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  std::string config_;
  int n_ = 0;
};

TEST_F(AgentCommandTest, ReadyOnlyOnceTheSourcesAreAttachedAndStatusShowsEventsFlowing) {
  std::vector<std::string> notes;
  std::unique_ptr<AgentProcess> agent = StartReady(Args(), &notes);
  ASSERT_FALSE(notes.empty());
  // At READY=1 the programs are attached and the socket answers.
  EXPECT_GT(BpfLinks(agent->pid()), 0);
  EXPECT_TRUE(absl::StrContains(notes.back(), "STATUS=")) << notes.back();
  // Its log says how long the start took, step by step (a slow start on a
  // loaded machine says where the time went).
  const std::string log = agent->Log();
  EXPECT_TRUE(absl::StrContains(log, "info: started in ")) << log;
  for (const char* step : {"clean-up after dead agents ", "sources loaded ", "sources started ",
                           "control socket ", "privileges dropped "}) {
    EXPECT_TRUE(absl::StrContains(log, step)) << step << " is not in\n" << log;
  }
  absl::StatusOr<control::Reply> first = Ask(socket(), StatusRequest());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_status()) << first->error();
  absl::SleepFor(absl::Milliseconds(1500));
  absl::StatusOr<control::Reply> second = Ask(socket(), StatusRequest());
  ASSERT_TRUE(second.ok()) << second.status();
  // The buffer and the durable store fill at the owner's moves, once a
  // second: on a loaded machine the first may come later.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (second->has_status() && absl::Now() < deadline &&
         (second->status().buffers_size() == 0 ||
          second->status().buffers(0).bytes_written() == 0 ||
          second->status().durable().entries() == 0)) {
    absl::SleepFor(absl::Milliseconds(100));
    second = Ask(socket(), StatusRequest());
    ASSERT_TRUE(second.ok()) << second.status();
  }
  const control::StatusReply& st = second->status();
  ASSERT_EQ(st.sources_size(), 1);
  EXPECT_EQ(st.sources(0).name(), "linux.bpf");
  EXPECT_EQ(st.sources(0).state(), control::SourceStatus::RUNNING);
  EXPECT_GT(st.sources(0).events(), first->status().sources(0).events());
  ASSERT_EQ(st.buffers_size(), 1);
  EXPECT_EQ(st.buffers(0).size_bytes(), 8192u * 1024);
  EXPECT_GT(st.buffers(0).bytes_written(), 0u);
  EXPECT_GT(st.durable().entries(), 0u);
  EXPECT_EQ(st.pid(), agent->pid());
  EXPECT_EQ(st.config_path(), config_);
  EXPECT_GT(st.rss_bytes(), 0u);
  EXPECT_GE(st.uptime_ms(), 1500u);
  // Memory: the 256 KiB rings of every CPU the kernel may bring online;
  // the ring and the durable store; the cgroup's count. The agent's own
  // pages hold the whole ring from the start (populated before the writers
  // need it) and each BPF ring once.
  const control::MemoryStatus& m = st.memory();
  EXPECT_EQ(m.bpf_ring_bytes(), uint64_t{256} * 1024 * static_cast<uint64_t>(PossibleCpus()));
  EXPECT_EQ(m.buffer_bytes(), uint64_t{8192} * 1024 + st.durable().capacity());
  EXPECT_GT(m.chunk_pool_bytes(), 0u);
  EXPECT_EQ(m.ftrace_buffer_bytes(), 0u) << "no linux.ftrace in this config";
  EXPECT_GT(m.proportional_bytes(), 0u);
  EXPECT_GE(m.proportional_bytes(), uint64_t{8192} * 1024 + m.bpf_ring_bytes());
  // The cgroup's count may be below the agent's own pages (libraries'
  // pages are charged to whoever read them first), never zero.
  if (!m.cgroup().empty()) {
    EXPECT_GT(m.cgroup_bytes(), 0u) << "the agent's cgroup " << m.cgroup();
  }
}

// A config path typed relative to where the agent was started is shown by
// `status` (read from anywhere else) as the absolute path it named.
TEST_F(AgentCommandTest, StatusShowsARelativeConfigPathAsAbsolute) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const std::string relative = std::filesystem::relative(config_, cwd).string();
  ASSERT_NE(relative[0], '/');
  std::vector<std::string> args = Args();
  ASSERT_EQ(args[0], "-c");
  args[1] = relative;
  std::unique_ptr<AgentProcess> agent = StartReady(args);
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->status().config_path(), absl::StrCat(cwd, "/", relative));
}

TEST_F(AgentCommandTest, SnapshotWaitReturnsAWholeTraceInTheOutputDir) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  absl::SleepFor(absl::Milliseconds(500));
  absl::StatusOr<control::Reply> reply =
      Ask(socket(), SnapshotRequest("disk slow / sdb", /*wait=*/true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_snapshot()) << reply->error();
  const std::string path = reply->snapshot().path();
  EXPECT_EQ(reply->snapshot().reason(), "disk slow / sdb");
  EXPECT_TRUE(absl::StartsWith(path, dir_.Join("snaps") + "/")) << path;
  EXPECT_TRUE(absl::EndsWith(path, "-disk_slow___sdb.pftrace")) << path;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Nothing else in the directory but its sidecar: no temporary file left.
  EXPECT_EQ(ListDir(dir_.Join("snaps")),
            (std::set<std::string>{path.substr(path.find_last_of('/') + 1),
                                   path.substr(path.find_last_of('/') + 1) + ".json"}));
  int code = -1;
  const std::string summary = RunRingsideCapture({"inspect", path}, &code);
  EXPECT_EQ(code, 0) << summary;
  const trace::Trace t = ReadTraceFile(path);
  bool stats = false, agent_named = false;
  int switches = 0;
  for (const trace::TracePacket& p : t.packet()) {
    stats |= p.has_trace_stats();
    for (const auto& proc : p.process_tree().processes()) agent_named |= proc.pid() == agent->pid();
    for (const auto& e : p.ftrace_events().event()) switches += e.has_sched_switch();
    switches += p.ftrace_events().compact_sched().switch_timestamp_size();
  }
  EXPECT_TRUE(stats);
  EXPECT_TRUE(agent_named);
  EXPECT_GT(switches, 0);
  // The status counts it.
  absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->status().snapshots().count(), 1u);
  EXPECT_EQ(status->status().snapshots().last_path(), path);
  EXPECT_EQ(status->status().snapshots().last_reason(), "disk slow / sdb");
}

// A full disk: the snapshot fails with a log line and a counter in status,
// leaves no file, and recording goes on; once there is room again the next
// snapshot is written. The disk is a 16 MiB tmpfs the agent alone sees.
TEST_F(AgentCommandTest, AFullDiskFailsTheSnapshotVisiblyAndRecordingGoesOn) {
  // Snapshots reserve their buffers' worth ahead (TracingSession::
  // MaxTraceBytes): 1 MiB * 1.25 + 256 KiB * 2 + 8 MiB, under 10 MiB.
  ASSERT_TRUE(WriteTextFile(config_, R"pb(
    buffers { size_kb: 1024 }
    data_sources {
      config {
        name: "linux.bpf"
        bpf_config { ring_size_kb: 256 }
      }
    }
    durable_buffer_size_kb: 256
  )pb"));
  const std::string snaps = dir_.Join("snaps");
  ASSERT_EQ(mkdir(snaps.c_str(), 0750), 0);
  auto agent =
      std::make_unique<AgentProcess>(Args(), dir_.Join("full.log"), notify_.path(),
                                     std::vector<std::string>{}, PrivateTmpfs{snaps, 16u << 20});
  const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
  ASSERT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
  // 12 MiB of the 16 taken: less room than a snapshot reserves.
  const std::string filler = agent->SeenByAgent(snaps + "/filler");
  std::ofstream(filler) << std::string(12u << 20, 'x');
  struct stat st;
  ASSERT_EQ(stat(filler.c_str(), &st), 0);
  ASSERT_EQ(st.st_size, 12 << 20);

  absl::StatusOr<control::Reply> failed = Ask(socket(), SnapshotRequest("full", /*wait=*/true));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_FALSE(failed->has_snapshot());
  EXPECT_TRUE(absl::StrContains(failed->error(), "No space left on device")) << failed->error();
  absl::StatusOr<control::Reply> before = Ask(socket(), StatusRequest());
  ASSERT_TRUE(before.ok()) << before.status();
  const control::SnapshotStatus& after_failure = before->status().snapshots();
  EXPECT_EQ(after_failure.count(), 0u);
  EXPECT_EQ(after_failure.failed(), 1u);
  EXPECT_TRUE(absl::StrContains(after_failure.last_error(), snaps + "/"))
      << after_failure.last_error();
  EXPECT_TRUE(absl::StrContains(after_failure.last_error(), "No space left on device"))
      << after_failure.last_error();
  // The reply goes out as the result is recorded; the log line follows.
  for (int i = 0; i < 100 && !absl::StrContains(agent->Log(), "failed: cannot write"); i++) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(absl::StrContains(agent->Log(), "snapshot " + snaps + "/")) << agent->Log();
  EXPECT_TRUE(absl::StrContains(agent->Log(), "failed: cannot write")) << agent->Log();
  // Neither the file nor its temporary one is left; nothing reached the
  // test's own view of the directory.
  EXPECT_EQ(ListDir(agent->SeenByAgent(snaps)), std::set<std::string>{"filler"});
  EXPECT_TRUE(ListDir(snaps).empty());

  // Still recording.
  absl::SleepFor(absl::Milliseconds(1000));
  absl::StatusOr<control::Reply> later = Ask(socket(), StatusRequest());
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_EQ(later->status().sources_size(), 1);
  EXPECT_EQ(later->status().sources(0).state(), control::SourceStatus::RUNNING);
  EXPECT_GT(later->status().sources(0).events(), before->status().sources(0).events());

  // Room again: the next snapshot is written.
  ASSERT_EQ(unlink(filler.c_str()), 0);
  absl::StatusOr<control::Reply> written = Ask(socket(), SnapshotRequest("room", /*wait=*/true));
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_TRUE(written->has_snapshot()) << written->error();
  int code = -1;
  const std::string summary =
      RunRingsideCapture({"inspect", agent->SeenByAgent(written->snapshot().path())}, &code);
  EXPECT_EQ(code, 0) << summary;
  absl::StatusOr<control::Reply> last = Ask(socket(), StatusRequest());
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->status().snapshots().count(), 1u);
  EXPECT_EQ(last->status().snapshots().failed(), 1u);
}

TEST_F(AgentCommandTest, OutputGroupMakesSnapshotsReadableByThatGroup) {
  ASSERT_TRUE(WriteTextFile(config_, absl::StrCat(kConfig, "output_group: \"adm\"\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("shared", true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_snapshot()) << reply->error();
  struct stat st;
  ASSERT_EQ(stat(reply->snapshot().path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, 4u) << "not adm's";
  ASSERT_EQ(stat(dir_.Join("snaps").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_EQ(st.st_gid, 4u) << "not adm's";
}

TEST_F(AgentCommandTest, SigusrOneWritesASnapshotWithReasonSignal) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  ASSERT_TRUE(agent->Signal(SIGUSR1));
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    for (const std::string& f : ListDir(dir_.Join("snaps"))) {
      if (absl::EndsWith(f, "-signal.pftrace")) files.insert(f);
    }
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  int code = -1;
  RunRingsideCapture({"inspect", dir_.Join("snaps") + "/" + *files.begin()}, &code);
  EXPECT_EQ(code, 0);
}

TEST_F(AgentCommandTest, SigtermExitsZeroAndLeavesNothingBehind) {
  RINGSIDE_REQUIRE_TRACEFS();
  // The embedded default: BPF and an ftrace instance of its own (the one it
  // holds open; other runs' instances come and go meanwhile).
  std::unique_ptr<AgentProcess> agent = StartReady(
      {"--socket", socket(), "--run-dir", dir_.Join("run"), "--output-dir", dir_.Join("snaps")});
  const std::set<std::string> own = ftrace::testing::InstancesHeldBy(agent->pid());
  EXPECT_EQ(own.size(), 1u) << "no ftrace instance of the agent's own while it runs";
  struct stat st;
  ASSERT_EQ(stat(socket().c_str(), &st), 0);
  ASSERT_EQ(stat(dir_.Join("run/agent.lock").c_str(), &st), 0);
  const std::vector<uint32_t> programs = BpfProgramIds(agent->pid());
  EXPECT_FALSE(programs.empty()) << "the agent holds no BPF program";
  ASSERT_TRUE(agent->Signal(SIGTERM));
  // STOPPING=1 first.
  EXPECT_FALSE(notify_.ReceiveUntil("STOPPING=1", absl::Seconds(30)).empty());
  std::optional<int> status = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << agent->Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << agent->Log();
  EXPECT_NE(stat(socket().c_str(), &st), 0) << "the socket is left";
  EXPECT_NE(stat(dir_.Join("run/agent.lock").c_str(), &st), 0) << "the lock file is left";
  for (const std::string& name : own) {
    EXPECT_FALSE(ftrace::testing::InstanceExists(name)) << "the agent left its instance " << name;
  }
  // The kernel frees a program once its last holder goes, some of them
  // after an RCU grace period (the CPU sampler's perf events): under load,
  // a moment after the agent's exit.
  for (uint32_t id : programs) {
    for (int i = 0; i < 100 && BpfProgramLoaded(id); i++) absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(BpfProgramLoaded(id)) << "BPF program " << id;
  }
  EXPECT_TRUE(absl::StrContains(agent->Log(), "stopping: Terminated")) << agent->Log();
}

// What a user types, against a real agent: status (text and JSON),
// snapshot --wait, inspect on its file, stop --wait.
TEST_F(AgentCommandTest, TheClientCommandsDriveARealAgent) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  absl::SleepFor(absl::Milliseconds(500));
  int code = -1;
  const std::string status = RunRingsideCapture({"status", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << status;
  EXPECT_TRUE(absl::StrContains(status, "linux.bpf")) << status;
  const std::string json = RunRingsideCapture({"status", "--json", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << json;
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat("\"pid\": ", agent->pid()))) << json;

  std::string path = RunRingsideCapture(
      {"snapshot", "--wait", "--reason", "from the cli", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << path;
  path = std::string(absl::StripTrailingAsciiWhitespace(path));
  EXPECT_TRUE(absl::StartsWith(path, dir_.Join("snaps") + "/")) << path;
  EXPECT_TRUE(absl::EndsWith(path, "-from_the_cli.pftrace")) << path;
  const std::string summary = RunRingsideCapture({"inspect", path}, &code);
  EXPECT_EQ(code, 0) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "clone_snapshot_trigger")) << summary;

  const std::string stopped = RunRingsideCapture({"stop", "--wait", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << stopped;
  std::optional<int> exit = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << agent->Log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << agent->Log();
}

// A snapshot whose file is slow to write (its open(2) held, as a slow disk
// or an on-access scanner would): `snapshot --wait` waits for it without
// holding the control socket, so `status` (a liveness probe) and `stop` are
// answered at once meanwhile; the --wait then gets its real answer.
TEST_F(AgentCommandTest, StatusIsAnsweredWhileASnapshotWaitWaitsForASlowFile) {
  const std::string snaps = dir_.Join("snaps");
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  HeldWait held = AskHeldWait(*agent, "slow disk");
  ASSERT_NE(held.gate, nullptr);
  EXPECT_TRUE(absl::StartsWith(held.path, snaps + "/")) << held.path;

  const absl::Time asked = absl::Now();
  const absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest(), absl::Seconds(1));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->has_status()) << status->error();
  EXPECT_LT(absl::Now() - asked, absl::Seconds(1));
  EXPECT_EQ(held.reply.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the --wait was answered before its file was written";

  held.gate->Release(/*allow=*/true);
  const absl::StatusOr<control::Reply> reply = held.reply.get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_snapshot()) << reply->error();
  EXPECT_TRUE(absl::EndsWith(reply->snapshot().path(), "-slow_disk.pftrace"))
      << reply->snapshot().path();
  struct stat st;
  EXPECT_EQ(stat(reply->snapshot().path().c_str(), &st), 0) << reply->snapshot().path();
}

// The same wait, for a file that cannot be written: the --wait gets the
// writer's error, naming the file.
TEST_F(AgentCommandTest, ASnapshotWaitGetsTheWritersErrorWhenTheFileCannotBeWritten) {
  const std::string snaps = dir_.Join("snaps");
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  HeldWait held = AskHeldWait(*agent, "refused");
  ASSERT_NE(held.gate, nullptr);

  held.gate->Release(/*allow=*/false);
  const absl::StatusOr<control::Reply> reply = held.reply.get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_FALSE(reply->has_snapshot());
  EXPECT_TRUE(absl::StrContains(reply->error(), snaps + "/")) << reply->error();
  EXPECT_TRUE(absl::StrContains(reply->error(), "Operation not permitted")) << reply->error();
}

// `stop` while a --wait waits for a slow file: answered at once; the agent
// still writes the file it queued before it exits, and the --wait gets
// that file's path (issue 52: it was told "the agent is stopping", though
// the file was then written).
TEST_F(AgentCommandTest, StopIsAnsweredWhileASnapshotWaitWaitsForASlowFile) {
  const std::string snaps = dir_.Join("snaps");
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  HeldWait held = AskHeldWait(*agent, "slow disk");
  ASSERT_NE(held.gate, nullptr);

  control::Request stop;
  stop.mutable_stop();
  const absl::StatusOr<control::Reply> stopped = Ask(socket(), stop, absl::Seconds(1));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(stopped->has_stop()) << stopped->error();
  // Stopping, it takes no new request, and the --wait still waits.
  for (absl::Time give_up = absl::Now() + absl::Seconds(30); absl::Now() < give_up;) {
    struct stat st;
    if (stat(socket().c_str(), &st) != 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(Ask(socket(), StatusRequest(), absl::Seconds(1)).ok());
  EXPECT_EQ(held.reply.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "the --wait was answered before its file was written";

  held.gate->Release(/*allow=*/true);
  const absl::StatusOr<control::Reply> reply = held.reply.get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_snapshot()) << reply->error();
  EXPECT_TRUE(absl::StartsWith(reply->snapshot().path(), snaps + "/")) << reply->snapshot().path();
  EXPECT_TRUE(absl::EndsWith(reply->snapshot().path(), "-slow_disk.pftrace"))
      << reply->snapshot().path();
  const std::optional<int> exit = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << agent->Log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << agent->Log();
  struct stat st;
  EXPECT_EQ(stat(reply->snapshot().path().c_str(), &st), 0) << reply->snapshot().path();
  EXPECT_TRUE(absl::StrContains(agent->Log(), "snapshot written: " + reply->snapshot().path()))
      << agent->Log();
}

TEST_F(AgentCommandTest, AStopRequestStopsItAsSigtermDoes) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  control::Request stop;
  stop.mutable_stop();
  absl::StatusOr<control::Reply> reply = Ask(socket(), stop);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_stop()) << reply->error();
  std::optional<int> status = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent->Log();
}

TEST_F(AgentCommandTest, AnUnprivilegedPeerIsRefusedAndTheAgentKeepsWorking) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  // The socket is 0660 root's: let nobody reach it to see the check itself.
  chmod(socket().c_str(), 0666);
  control::Request stop;
  stop.mutable_stop();
  std::string bytes;
  const std::string payload = stop.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(payload.size());
  bytes.append(reinterpret_cast<const char*>(&n), 4);
  bytes += payload;
  const std::string path = socket();
  absl::StatusOr<std::string> got =
      RunAs(65534, 65534, {}, [&] { return ExchangeRaw(path, bytes); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(absl::StrContains(*got, "permission denied")) << *got;
  absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->has_status());
  EXPECT_FALSE(agent->WaitExit(absl::Milliseconds(200)).has_value()) << "it stopped";
}

TEST_F(AgentCommandTest, AGarbageRequestGetsAnErrorAndTheAgentCarriesOn) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  RawClient raw(socket());
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw.Send(std::string("\x05\x00\x00\x00\xff\xff\xff\xff\xff", 9)));
  absl::StatusOr<control::Reply> reply = raw.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(absl::StrContains(reply->error(), "malformed")) << reply->error();
  absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->has_status());
}

// A control socket in a directory anyone can write (a /tmp-like 1777): the
// agent does not start, and says which directory and why.
TEST_F(AgentCommandTest, ASocketInADirectoryOthersCanWriteIsRefusedNamingIt) {
  const std::string open_dir = dir_.Join("open");
  ASSERT_EQ(mkdir(open_dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 01777), 0);
  std::vector<std::string> args = Args();
  args[3] = open_dir + "/control.sock";
  AgentProcess agent(args, dir_.Join("open.log"), "");
  const std::optional<int> status = agent.WaitExit(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << agent.Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status << agent.Log();
  EXPECT_TRUE(absl::StrContains(agent.Log(), "the control socket's directory " + open_dir +
                                                 " can be written by others (mode 1777)"))
      << agent.Log();
  EXPECT_TRUE(ListDir(open_dir).empty());
}

TEST_F(AgentCommandTest, ASecondAgentRefusesToStartNamingTheFirst) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  std::vector<std::string> args = Args();
  args[3] = dir_.Join("other.sock");
  AgentProcess second(args, dir_.Join("second.log"), "");
  std::optional<int> status = second.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
  const std::string log = second.Log();
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("pid ", agent->pid()))) << log;
  EXPECT_TRUE(absl::StrContains(log, socket())) << log;
  // The first one is untouched.
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  ASSERT_TRUE(st.ok()) << st.status();
}

TEST_F(AgentCommandTest, ADeadAgentsLockAndSocketAreCleanedUp) {
  {
    std::unique_ptr<AgentProcess> agent = StartReady(Args());
    ASSERT_TRUE(agent->Signal(SIGKILL));
    agent->WaitExit(absl::Seconds(10));
  }
  struct stat st;
  ASSERT_EQ(stat(socket().c_str(), &st), 0) << "kill -9 left no socket to clean up";
  std::unique_ptr<AgentProcess> again = StartReady(Args());
  absl::StatusOr<control::Reply> reply = Ask(socket(), StatusRequest());
  ASSERT_TRUE(reply.ok()) << reply.status() << again->Log();
  EXPECT_EQ(reply->status().pid(), again->pid());
}

TEST_F(AgentCommandTest, SighupWithABrokenConfigKeepsTheRunningOne) {
  std::unique_ptr<AgentProcess> agent = StartReady(Args(dir_.Join("a")));
  ASSERT_TRUE(WriteTextFile(config_, "buffers { size_kb: 8192 }\nbogus_field: 1\n"));
  ASSERT_TRUE(agent->Signal(SIGHUP));
  // Reloading, then ready again on the old config.
  EXPECT_FALSE(notify_.ReceiveUntil("READY=1", absl::Seconds(30)).empty());
  const std::string log = agent->Log();
  EXPECT_TRUE(absl::StrContains(log, config_ + ": line 2")) << log;
  EXPECT_TRUE(absl::StrContains(log, "bogus_field")) << log;
  EXPECT_TRUE(absl::StrContains(log, "keeping the running config")) << log;
  absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("after", true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(absl::StartsWith(reply->snapshot().path(), dir_.Join("a") + "/")) << reply->error();
  // status says so too, and `status -c` of the broken file still finds it.
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->status().reload().count(), 1u);
  EXPECT_EQ(st->status().reload().refused(), 1u);
  EXPECT_TRUE(absl::StrContains(st->status().reload().last_error(), "bogus_field"))
      << st->status().reload().last_error();
  int code = -1;
  const std::string text =
      RunRingsideCapture({"status", "-c", config_, "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "last refused, running config kept: ")) << text;
}

TEST_F(AgentCommandTest, SighupAppliesOutputDirLiveAndNamesWhatNeedsARestart) {
  // No --output-dir (which would win over the file): the config's, so a
  // reload can move it.
  ASSERT_TRUE(
      WriteTextFile(config_, absl::StrCat("output_dir: \"", dir_.Join("a"), "\"\n", kConfig)));
  std::unique_ptr<AgentProcess> agent =
      StartReady({"-c", config_, "--socket", socket(), "--run-dir", dir_.Join("run")});
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat("output_dir: \"", dir_.Join("b"),
                            "\"\nbuffers { size_kb: 4096 }\n"
                            "data_sources { config { name: \"linux.bpf\" bpf_config { "
                            "ring_size_kb: 256 } } }\ndurable_buffer_size_kb: 1024\n")));
  ASSERT_TRUE(agent->Signal(SIGHUP));
  EXPECT_FALSE(notify_.ReceiveUntil("READY=1", absl::Seconds(30)).empty());
  const std::string log = agent->Log();
  EXPECT_TRUE(absl::StrContains(log, "buffers changed, which needs a restart")) << log;
  EXPECT_TRUE(absl::StrContains(log, "applied: output_dir")) << log;
  absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("moved", true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(absl::StartsWith(reply->snapshot().path(), dir_.Join("b") + "/")) << reply->error();
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status().buffers(0).size_bytes(), 8192u * 1024) << "the buffer was resized live";
  // status names what waits for a restart.
  EXPECT_EQ(st->status().reload().count(), 1u);
  EXPECT_EQ(st->status().reload().refused(), 0u);
  EXPECT_EQ(st->status().reload().last_error(), "");
  const auto& waiting = st->status().reload().waiting_for_restart();
  EXPECT_NE(std::find(waiting.begin(), waiting.end(), "buffers"), waiting.end());
}

TEST_F(AgentCommandTest, ItFeedsTheWatchdogWhenTheUnitAsksForIt) {
  // WatchdogSec=1s: systemd sets WATCHDOG_USEC (WATCHDOG_PID only when it
  // forked the process itself, which it names; unset applies to us).
  std::unique_ptr<AgentProcess> agent = StartReady(Args(), nullptr, {"WATCHDOG_USEC=1000000"});
  int pings = 0;
  const absl::Time end = absl::Now() + absl::Milliseconds(2200);
  while (absl::Now() < end) {
    const std::string d = notify_.Receive(end - absl::Now());
    pings += d == "WATCHDOG=1";
  }
  // Every half period: about 4 in 2.2 s; at least 3 even on a loaded machine.
  EXPECT_GE(pings, 3) << agent->Log();
}

TEST_F(AgentCommandTest, ANamedTriggerFiresOneSnapshotAfterItsDelayJoinedByRepeatsThenCoolsDown) {
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig,
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers { name: "
                            "\"deploy\" stop_delay_ms: 3000 cooldown_ms: 60000 } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  // As a deploy tool would: the command line.
  int code = -1;
  const std::string fired = RunRingsideCapture({"trigger", "deploy", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << fired;
  // It says what it did: fired, when, and where the file goes.
  EXPECT_TRUE(absl::StartsWith(fired, "trigger deploy fired: a snapshot in ")) << fired;
  EXPECT_TRUE(absl::StrContains(fired, ", into " + dir_.Join("snaps"))) << fired;
  control::Request trigger;
  trigger.mutable_trigger()->set_name("deploy");
  // While the first waits for its delay, the same trigger joins it.
  absl::StatusOr<control::Reply> joining = Ask(socket(), trigger);
  ASSERT_TRUE(joining.ok()) << joining.status();
  ASSERT_TRUE(joining->has_trigger()) << joining->error();
  EXPECT_TRUE(joining->trigger().joined());
  EXPECT_GT(joining->trigger().delay_ms(), 0u);
  EXPECT_LE(joining->trigger().delay_ms(), 3000u);
  const std::string joined = RunRingsideCapture({"trigger", "deploy", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << joined;
  EXPECT_TRUE(absl::StartsWith(joined, "trigger deploy joined the snapshot already pending: "))
      << joined;
  control::Request unknown;
  unknown.mutable_trigger()->set_name("nope");
  absl::StatusOr<control::Reply> third = Ask(socket(), unknown);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(absl::StrContains(third->error(), "no trigger named 'nope'")) << third->error();
  const std::string refused =
      RunRingsideCaptureStderr({"trigger", "nope", "--socket", socket()}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(absl::StrContains(refused, "no trigger named 'nope'")) << refused;
  // Not before the delay; then exactly one file.
  EXPECT_TRUE(ListDir(dir_.Join("snaps")).empty());
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    for (const std::string& f : ListTraces(dir_.Join("snaps"))) {
      if (f[0] != '.') files.insert(f);  // Not the temporary file being written.
    }
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  EXPECT_TRUE(absl::EndsWith(*files.begin(), "-deploy.pftrace")) << *files.begin();
  // Once it fired, the cooldown holds the next one back.
  absl::StatusOr<control::Reply> later = Ask(socket(), trigger);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE(absl::StrContains(later->error(), "suppressed: cooldown")) << later->error();
  // The file is in place a moment before the writer's status says so
  // (retention runs in between).
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  for (int i = 0; i < 100 && st.ok() && st->status().snapshots().last_reason().empty(); i++) {
    absl::SleepFor(absl::Milliseconds(50));
    st = Ask(socket(), StatusRequest());
  }
  ASSERT_TRUE(st.ok()) << st.status();
  // The two that joined and the one the cooldown held back.
  EXPECT_EQ(st->status().snapshots().suppressed(), 3u);
  EXPECT_EQ(st->status().snapshots().last_reason(), "deploy");
  // The deploy file names the three requests it answers; the next
  // snapshot's stats count the one held back too.
  auto stats_of = [](const std::string& path) {
    trace::TraceStats stats;
    const trace::Trace t = ReadTraceFile(path);
    for (const trace::TracePacket& p : t.packet()) {
      if (p.has_trace_stats()) stats = p.trace_stats();
    }
    return stats;
  };
  const trace::TraceStats deploy_stats = stats_of(dir_.Join("snaps/" + *files.begin()));
  ASSERT_EQ(deploy_stats.ringside_snapshot_triggers_size(), 3);
  for (const auto& t : deploy_stats.ringside_snapshot_triggers()) {
    EXPECT_EQ(t.trigger_name(), "deploy");
    EXPECT_EQ(t.producer_name(), "ringside trigger");
  }
  absl::StatusOr<control::Reply> next = Ask(socket(), SnapshotRequest("after", true));
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(next->has_snapshot()) << next->error();
  const trace::TraceStats next_stats = stats_of(next->snapshot().path());
  ASSERT_EQ(next_stats.ringside_triggers_size(), 2);
  EXPECT_EQ(next_stats.ringside_triggers(0).name(), "deploy");
  EXPECT_EQ(next_stats.ringside_triggers(0).fired(), 1u);
  EXPECT_EQ(next_stats.ringside_triggers(0).joined(), 2u);
  EXPECT_EQ(next_stats.ringside_triggers(0).suppressed(), 1u);
  // A request counts as "request"; its reason is in the file's triggers.
  EXPECT_EQ(next_stats.ringside_triggers(1).name(), "request");
  EXPECT_EQ(next_stats.ringside_triggers(1).fired(), 1u);
  ASSERT_EQ(next_stats.ringside_snapshot_triggers_size(), 1);
  EXPECT_EQ(next_stats.ringside_snapshot_triggers(0).trigger_name(), "after");
}

TEST_F(AgentCommandTest, RetentionKeepsTheNewestSnapshotsAndWhatIsNotOurs) {
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig, "max_snapshot_files: 2\nsnapshot_request_cooldown_ms: 0\n")));
  mkdir(dir_.Join("snaps").c_str(), 0750);
  ASSERT_TRUE(WriteTextFile(dir_.Join("snaps/notes.txt"), "mine"));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  std::vector<std::string> paths;
  for (const char* reason : {"a", "b", "c"}) {
    absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest(reason, true));
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_TRUE(reply->has_snapshot()) << reply->error();
    paths.push_back(reply->snapshot().path());
  }
  struct stat st;
  EXPECT_NE(stat(paths[0].c_str(), &st), 0) << "the oldest snapshot was kept";
  EXPECT_EQ(stat(paths[1].c_str(), &st), 0);
  EXPECT_EQ(stat(paths[2].c_str(), &st), 0);
  EXPECT_EQ(stat(dir_.Join("snaps/notes.txt").c_str(), &st), 0) << "deleted a file not ours";
}

// A peer of the control socket asking for snapshots as fast as it can: the
// requests beyond the default limits are refused, saying which, and counted
// as suppressed; the requested snapshots that are written are the first
// retention deletes, so the snapshot a trigger took before stays.
TEST_F(AgentCommandTest, AFloodOfRequestsIsHeldBackAndPushesOutNoTriggeredSnapshot) {
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig,
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers { name: "
                            "\"deploy\" stop_delay_ms: 0 } }\nmax_snapshot_files: 3\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  control::Request trigger;
  trigger.mutable_trigger()->set_name("deploy");
  absl::StatusOr<control::Reply> fired = Ask(socket(), trigger);
  ASSERT_TRUE(fired.ok()) << fired.status();
  ASSERT_TRUE(fired->has_trigger()) << fired->error();
  std::string deploy;
  for (int i = 0; i < 300 && deploy.empty(); i++) {
    for (const std::string& f : ListDir(dir_.Join("snaps"))) {
      if (absl::EndsWith(f, "-deploy.pftrace")) deploy = dir_.Join("snaps/" + f);
    }
    if (deploy.empty()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_FALSE(deploy.empty()) << agent->Log();

  // Until three requested snapshots are in (more than the retention
  // leaves room for beside the deploy one), as fast as replies come.
  int written = 0, refused = 0;
  std::string last;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (written < 3 && absl::Now() < give_up) {
    absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("flood", written == 2));
    ASSERT_TRUE(reply.ok()) << reply.status();
    if (reply->has_snapshot()) {
      written++;
      last = reply->snapshot().path();
      continue;
    }
    refused++;
    ASSERT_TRUE(absl::StrContains(reply->error(), "suppressed")) << reply->error();
    ASSERT_TRUE(absl::StrContains(reply->error(), "snapshot_request_cooldown_ms (1000 ms)"))
        << reply->error();
  }
  ASSERT_EQ(written, 3) << agent->Log();
  EXPECT_GT(refused, 0);
  struct stat st;
  EXPECT_EQ(stat(deploy.c_str(), &st), 0) << "a request pushed out the triggered snapshot";
  EXPECT_EQ(stat(last.c_str(), &st), 0);
  std::set<std::string> files;
  for (const std::string& f : ListTraces(dir_.Join("snaps"))) {
    if (f[0] != '.') files.insert(f);
  }
  EXPECT_EQ(files.size(), 3u);
  absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->status().snapshots().suppressed(), static_cast<uint64_t>(refused));
  EXPECT_EQ(status->status().snapshots().count(), 4u);
}

// Issue 52: a member of control_group gave `--reason deploy` (a configured
// trigger's name) and 70 other reasons, and so forged the trigger's counts,
// filled the tally until root's trigger counted as "other", and spent the
// one request limit root's own snapshot then met. Requests are one row,
// "request", whatever their reasons; a configured trigger keeps its row;
// root's limit is its own.
TEST_F(AgentCommandTest, ARequestsReasonNeitherPosesAsATriggerNorSpendsAnotherUsersLimit) {
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig,
                            "control_group: \"nogroup\"\n"
                            "snapshot_request_cooldown_ms: 0\nmax_snapshot_requests_per_hour: 1\n"
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers { name: "
                            "\"deploy\" stop_delay_ms: 0 } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  const absl::StatusOr<std::string> member = RunAs(65534, 65534, {65534}, [&] {
    std::string outcomes;
    for (int i = 0; i <= 70; i++) {
      const absl::StatusOr<control::Reply> reply =
          Ask(socket(), SnapshotRequest(i == 0 ? "deploy" : absl::StrCat("reason-", i), false));
      if (!reply.ok()) return std::string(reply.status().message());
      outcomes += reply->has_snapshot()                             ? "f"
                  : absl::StrContains(reply->error(), "suppressed") ? "s"
                                                                    : reply->error();
    }
    return outcomes;
  });
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(*member, "f" + std::string(70, 's'));

  control::Request trigger;
  trigger.mutable_trigger()->set_name("deploy");
  const absl::StatusOr<control::Reply> fired = Ask(socket(), trigger);
  ASSERT_TRUE(fired.ok()) << fired.status();
  ASSERT_TRUE(fired->has_trigger()) << fired->error();
  // Root's own request: its limit is its own.
  const absl::StatusOr<control::Reply> own = Ask(socket(), SnapshotRequest("root's own", true));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(own->has_snapshot()) << own->error();

  std::map<std::string, control::SnapshotStatus::Trigger> rows;
  for (absl::Time give_up = absl::Now() + absl::Seconds(30); absl::Now() < give_up;) {
    const absl::StatusOr<control::Reply> status = Ask(socket(), StatusRequest());
    ASSERT_TRUE(status.ok()) << status.status();
    rows.clear();
    for (const auto& t : status->status().snapshots().triggers()) rows[t.name()] = t;
    if (rows.count("deploy") && rows["deploy"].fired() + rows["deploy"].joined() == 1) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::string names;
  for (const auto& [name, row] : rows) absl::StrAppend(&names, name, " ");
  ASSERT_EQ(rows.size(), 2u) << names;
  ASSERT_TRUE(rows.count("request")) << names;
  ASSERT_TRUE(rows.count("deploy")) << names;
  // Each request in a file: its own, or one pending it joined (root's may
  // join the deploy snapshot still waiting to be written).
  EXPECT_EQ(rows["request"].kind(), "request");
  EXPECT_EQ(rows["request"].fired() + rows["request"].joined(), 2u);
  EXPECT_EQ(rows["request"].suppressed(), 70u);
  EXPECT_EQ(rows["deploy"].kind(), "config");
  EXPECT_EQ(rows["deploy"].fired() + rows["deploy"].joined(), 1u);
  EXPECT_EQ(rows["deploy"].suppressed(), 0u);
}

TEST_F(AgentCommandTest, ATriggerStillInItsDelayIsWrittenWhenTheAgentStops) {
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig,
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers { name: "
                            "\"late\" stop_delay_ms: 600000 } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  control::Request trigger;
  trigger.mutable_trigger()->set_name("late");
  absl::StatusOr<control::Reply> reply = Ask(socket(), trigger);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_trigger()) << reply->error();
  ASSERT_TRUE(agent->Signal(SIGTERM));
  std::optional<int> status = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent->Log();
  const std::set<std::string> files = ListTraces(dir_.Join("snaps"));
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  EXPECT_TRUE(absl::EndsWith(*files.begin(), "-late.pftrace")) << *files.begin();
}

// Finished snapshot files in `dir` (not the temporary one being written).
std::set<std::string> SnapshotFiles(const std::string& dir) {
  std::set<std::string> files;
  for (const std::string& f : ListTraces(dir)) {
    if (f[0] != '.') files.insert(f);
  }
  return files;
}

// The issue's proof: a crash fires a snapshot by itself, holding the
// crash; a burst of crashes within the cooldown makes one file, and the
// rest are counted as suppressed.
//
// The agent records only the crashers' cgroup: the 8 MiB ring must still
// hold the burst when the snapshot is taken 5 s later, whatever else the
// machine runs meanwhile (a whole machine's scheduling under a pipe storm
// wraps it in about a second, and the file then held none of the crashes).
TEST_F(AgentCommandTest, ABurstOfCrashesFiresOneSnapshotHoldingTheFirstAndCountsTheRest) {
  testing::ScratchCgroup cgroup("crashers");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  std::string config = kConfig;
  ASSERT_TRUE(
      absl::StrReplaceAll({{"bpf_config { ring_size_kb: 256 }",
                            absl::StrCat("bpf_config { ring_size_kb: 256 filter_cgroup_path: \"",
                                         cgroup.path(), "\" }")}},
                          &config) == 1);
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(config,
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers {\n"
                            "  name: \"crash\" stop_delay_ms: 5000 cooldown_ms: 600000\n"
                            "  incident { kinds: FATAL_SIGNAL comms: \"rs-crasher\" } } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  const absl::Time burst_start = absl::Now();
  const std::vector<pid_t> crashed =
      ringside::testing::Crash(50, "rs-crasher", cgroup.dir() + "/cgroup.procs");
  ASSERT_EQ(crashed.size(), 50u) << "crashers that did not die of their SIGSEGV";
  // Within the delay, so that the rest join the first one's snapshot.
  ASSERT_LT(absl::Now() - burst_start, absl::Seconds(4)) << "the machine is too slow for this test";
  const std::string snaps = dir_.Join("snaps");
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    files = SnapshotFiles(snaps);
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  EXPECT_TRUE(absl::EndsWith(*files.begin(), "-crash.pftrace")) << *files.begin();
  uint64_t suppressed = 0;
  for (int i = 0; i < 100 && suppressed < 49; i++) {
    absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
    ASSERT_TRUE(st.ok()) << st.status();
    suppressed = st->status().snapshots().suppressed();
    if (suppressed < 49) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(suppressed, 49u) << agent->Log();
  EXPECT_EQ(SnapshotFiles(snaps).size(), 1u);

  // The file holds every crash (the 5 s delay covers the burst), and
  // the trigger at the time of the one that fired it. (Which one that is
  // depends on which CPU's ring the reader read first.)
  const trace::Trace t = ReadTraceFile(snaps + "/" + *files.begin());
  std::vector<trace::TracePacket> triggers;
  std::map<int32_t, uint64_t> crash_ts;  // pid -> time of its SIGSEGV.
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_clone_snapshot_trigger()) triggers.push_back(p);
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.has_signal_generate() && e.signal_generate().sig() == SIGSEGV) {
        crash_ts[e.signal_generate().pid()] = e.timestamp();
      }
    }
  }
  for (pid_t pid : crashed) EXPECT_EQ(crash_ts.count(pid), 1u) << "no crash of pid " << pid;
  // It names all 50 crashes it answers, and counts them.
  const trace::TraceStats& stats = t.packet(t.packet_size() - 1).trace_stats();
  ASSERT_EQ(stats.ringside_snapshot_triggers_size(), 50);
  std::set<uint64_t> trigger_times;
  for (const auto& st : stats.ringside_snapshot_triggers()) {
    EXPECT_EQ(st.trigger_name(), "crash");
    trigger_times.insert(st.timestamp());
  }
  for (pid_t pid : crashed) EXPECT_EQ(trigger_times.count(crash_ts[pid]), 1u) << pid;
  ASSERT_EQ(stats.ringside_triggers_size(), 1);
  EXPECT_EQ(stats.ringside_triggers(0).fired(), 1u);
  EXPECT_EQ(stats.ringside_triggers(0).joined(), 49u);
  ASSERT_EQ(triggers.size(), 1u);
  EXPECT_EQ(triggers[0].clone_snapshot_trigger().trigger_name(), "crash");
  EXPECT_EQ(triggers[0].clone_snapshot_trigger().producer_name(), "linux.bpf");
  bool at_a_crash = false;
  for (pid_t pid : crashed) at_a_crash |= crash_ts[pid] == triggers[0].timestamp();
  EXPECT_TRUE(at_a_crash) << "the trigger's time " << triggers[0].timestamp() << " is no crash's";
  EXPECT_TRUE(
      absl::StrContains(agent->Log(), "trigger crash from the kernel (fatal_signal 11 of pid"))
      << agent->Log();
}

// A cgroup filter: the crash of a task in the cgroup fires the trigger; the
// same crash outside it does not.
TEST_F(AgentCommandTest, AnIncidentFilterByCgroupFiresOnlyForTasksInIt) {
  testing::ScratchCgroup cgroup("incident");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  ASSERT_TRUE(WriteTextFile(
      config_, absl::StrCat(kConfig,
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers {\n"
                            "  name: \"cg-crash\" stop_delay_ms: 200 cooldown_ms: 0\n"
                            "  incident { kinds: FATAL_SIGNAL comms: \"rs-cg-crasher\"\n"
                            "    cgroups: \"",
                            cgroup.path(), "\" } } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  const std::string snaps = dir_.Join("snaps");
  ASSERT_EQ(ringside::testing::Crash(1, "rs-cg-crasher").size(), 1u);
  absl::SleepFor(absl::Seconds(2));
  EXPECT_TRUE(SnapshotFiles(snaps).empty()) << "a crash outside the cgroup fired it";

  const std::vector<pid_t> inside =
      ringside::testing::Crash(1, "rs-cg-crasher", cgroup.dir() + "/cgroup.procs");
  ASSERT_EQ(inside.size(), 1u);
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    files = SnapshotFiles(snaps);
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  EXPECT_TRUE(absl::EndsWith(*files.begin(), "-cg-crash.pftrace")) << *files.begin();
  EXPECT_TRUE(absl::StrContains(agent->Log(), absl::StrCat("of pid ", inside[0]))) << agent->Log();
  absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->status().snapshots().suppressed(), 0u);
}

// A trigger that waits for incidents no source reports would never fire:
// the agent says so instead of leaving the user to find out after a crash.
TEST_F(AgentCommandTest, AnIncidentTriggerWithoutTheIncidentProgramsIsNamedInAWarning) {
  ASSERT_TRUE(WriteTextFile(config_, R"pb(
    buffers { size_kb: 8192 }
    data_sources {
      config {
        name: "linux.bpf"
        bpf_config { ring_size_kb: 256 incidents: false }
      }
    }
    trigger_config {
      trigger_mode: CLONE_SNAPSHOT
      triggers {
        name: "crash"
        incident { kinds: FATAL_SIGNAL }
      }
    }
  )pb"));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  EXPECT_TRUE(absl::StrContains(agent->Log(),
                                "warning: trigger crash: no incident reaches its incident "
                                "filter: linux.bpf's incident programs are off in this config "
                                "(bpf_config.incidents), and this config has no linux.ftrace "
                                "source to report them; it answers requests by name only"))
      << agent->Log();
}

}  // namespace
}  // namespace ringside::agent::testing
