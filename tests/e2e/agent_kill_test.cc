// kill -9 of `ringside agent` at random moments, on the real kernel: while
// it streams files under a scheduling storm, and while it writes a
// snapshot. After every kill the next agent starts on the same output and
// run directories, and the directory is checked before and after its
// recovery: finished files whole, the ".partial" file valid up to its last
// whole packet (and kept whole by the next agent), a snapshot never under
// its final name before it is whole, nothing else left. The dead agent's
// tracefs instance, lock file and socket go too.

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/lifecycle/agent_lock.h"
#include "agent/output/file_retention.h"
#include "agent/output/rotating_trace_file.h"
#include "agent/output/trace_sidecar.h"
#include "buffer/trace_packet.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/test_size.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

// Small files and short periods, so that a kill finds files at every stage;
// a 32 MiB ring, so that a snapshot takes long enough to be cut; an ftrace
// source, so that each agent owns a tracefs instance.
constexpr char kKillConfig[] = R"pb(
  buffers { size_kb: 32768 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 512 }
    }
  }
  data_sources {
    config {
      name: "linux.ftrace"
      ftrace_config { ftrace_events: "sched/sched_wakeup" buffer_size_kb: 256 }
    }
  }
  durable_buffer_size_kb: 1024
  write_into_file: true
  file_write_period_ms: 100
  max_file_size_bytes: 262144
)pb";

constexpr char kSnapshotReason[] = "kill9";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The end of the last whole packet of `bytes` read as a Trace (field 1,
// length-delimited, one after another); every whole packet must parse as
// a TracePacket, else *bad_packet is set.
size_t EndOfWholePackets(const std::string& bytes, bool* bad_packet) {
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* end = begin + bytes.size();
  size_t at = 0;
  *bad_packet = false;
  while (at < bytes.size()) {
    const buffer::PacketFrame frame = buffer::ReadPacketFrame(begin + at, end);
    if (frame.status == buffer::PacketFrame::Status::kNotAPacket) {
      *bad_packet = true;
      return at;
    }
    if (frame.status == buffer::PacketFrame::Status::kCut) return at;  // Cut by the kill.
    trace::TracePacket packet;
    if (!packet.ParseFromArray(begin + at + frame.header_size,
                               static_cast<int>(frame.packet_size))) {
      *bad_packet = true;
      return at;
    }
    at += frame.size();
  }
  return at;
}

int CountTraceStats(const trace::Trace& t) {
  int n = 0;
  for (const trace::TracePacket& p : t.packet()) n += p.has_trace_stats();
  return n;
}

using ftrace::testing::InstanceExists;
using ftrace::testing::InstancesHeldBy;

class AgentKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    RINGSIDE_REQUIRE_TRACEFS();
    config_ = dir_.Join("agent.pbtxt");
    std::ofstream(config_) << kKillConfig;
    mkdir(run_dir_.c_str(), 0755);
    mkdir(out_.c_str(), 0750);
    const char* seed = getenv("RINGSIDE_KILL_SEED");
    uint64_t s = 0;
    seed_ = seed != nullptr && absl::SimpleAtoi(seed, &s)
                ? s
                : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
    random_.seed(seed_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "seed " << seed_ << " (RINGSIDE_KILL_SEED=" << seed_ << " repeats it)\n";
    }
  }

  std::vector<std::string> Args() const {
    return {"-c", config_, "--socket", socket(), "--run-dir", run_dir_, "--output-dir", out_};
  }
  std::string socket() const { return dir_.Join("control.sock"); }
  std::string lock_path() const { return run_dir_ + "/agent.lock"; }
  std::string Out(const std::string& name) const { return absl::StrCat(out_, "/", name); }

  // A new agent on the same directories, once READY=1; nullptr (and a
  // failure) if it does not get there.
  std::unique_ptr<AgentProcess> StartReady() {
    auto agent = std::make_unique<AgentProcess>(
        Args(), dir_.Join(absl::StrCat("agent-", ++starts_, ".log")), notify_.path());
    if (const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60)); !ready.ok()) {
      ADD_FAILURE() << "start " << starts_ << ": " << ready << "; the agent said:\n"
                    << agent->Log();
      return nullptr;
    }
    return agent;
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random_); }

  // What the agent dead on `out_` left, checked: finished files and
  // snapshots parse whole, with their trailer; the ".partial" file is whole
  // packets and then at most part of one; a temporary file only after a
  // kill mid-snapshot; nothing else. Returns the .partial's name and the
  // size of its whole packets (to find it recovered), empty if none.
  struct Left {
    std::string partial;
    size_t partial_whole_bytes = 0;
    std::string temporary;
  };
  Left CheckWhatAKillLeft() {
    Left left;
    const std::string host = LocalHostname();
    for (const std::string& name : ListDir(out_)) {
      const std::string path = Out(name);
      if (IsSidecarOrItsTemporary(name)) {
        // A sidecar comes after its file, whole (written aside, then
        // renamed); a kill may leave one half written under its hidden
        // name, which the next agent writes again.
        if (name[0] != '.') {
          const std::string trace = name.substr(0, name.size() - 5);
          EXPECT_TRUE(IsStreamFileName(trace, host) || absl::StrContains(trace, kSnapshotReason))
              << name;
          EXPECT_TRUE(nlohmann::json::parse(ReadAll(path), nullptr, false).is_object())
              << name << " is under its final name but not whole";
        }
        continue;
      }
      if (IsStreamFileName(name, host) || absl::StrContains(name, kSnapshotReason)) {
        if (checked_.count(name) > 0) continue;
        const std::string bytes = ReadAll(path);
        trace::Trace t;
        EXPECT_TRUE(t.ParseFromString(bytes)) << name << " is under a final name but not whole";
        // A recovered .partial has no trailer; any other finished file does.
        if (recovered_.count(name) == 0) {
          EXPECT_EQ(CountTraceStats(t), 1) << name << " ends before its trailer";
        }
        if (!IsStreamFileName(name, host)) snapshots_checked_++;
        files_checked_++;
        checked_.insert(name);
        continue;
      }
      if (absl::EndsWith(name, ".pftrace.partial") &&
          IsStreamFileName(name.substr(0, name.size() - 8), host)) {
        EXPECT_TRUE(left.partial.empty()) << "two .partial files: " << left.partial << ", " << name;
        const std::string bytes = ReadAll(path);
        bool bad = false;
        left.partial = name;
        left.partial_whole_bytes = EndOfWholePackets(bytes, &bad);
        EXPECT_FALSE(bad) << name << " holds a packet that does not parse at byte "
                          << left.partial_whole_bytes;
        partials_checked_++;
        if (left.partial_whole_bytes < bytes.size()) partials_cut_++;
        continue;
      }
      if (absl::StartsWith(name, ".ringside-")) {
        if (empty_temporaries_.count(name) > 0) continue;
        EXPECT_TRUE(left.temporary.empty()) << "two temporary files: " << name;
        left.temporary = name;
        continue;
      }
      ADD_FAILURE() << "a kill left " << name << " in the output directory";
    }
    return left;
  }

  // After the next agent's start: what the dead one left is recovered.
  void CheckRecovered(const Left& left) {
    if (!left.partial.empty()) {
      const std::string kept = left.partial.substr(0, left.partial.size() - 8);
      struct stat st;
      ASSERT_EQ(stat(Out(kept).c_str(), &st), 0) << left.partial << " was not kept";
      EXPECT_EQ(static_cast<size_t>(st.st_size), left.partial_whole_bytes)
          << kept << " is not the .partial's whole packets";
      trace::Trace t;
      EXPECT_TRUE(t.ParseFromString(ReadAll(Out(kept)))) << kept << " does not parse whole";
      EXPECT_EQ(ListDir(out_).count(left.partial), 0u);
      recovered_.insert(kept);
    }
    if (!left.temporary.empty()) {
      struct stat st;
      // An empty one (killed between its creation and its reserve) is left
      // for a later start, as RemoveDeadTemporaryFiles documents.
      if (lstat(Out(left.temporary).c_str(), &st) == 0 && st.st_size == 0) {
        empty_temporaries_.insert(left.temporary);
      } else {
        EXPECT_NE(lstat(Out(left.temporary).c_str(), &st), 0)
            << left.temporary << " was not removed by the next agent";
      }
    }
  }

  // Kills `agent`, checks what it left, starts the next one and checks
  // that it recovered it and cleaned up after the dead one.
  std::unique_ptr<AgentProcess> KillAndRestart(std::unique_ptr<AgentProcess> agent) {
    const std::set<std::string> instances = InstancesHeldBy(agent->pid());
    EXPECT_EQ(instances.size(), 1u) << "the agent holds no tracefs instance";
    const pid_t dead = agent->pid();
    EXPECT_TRUE(agent->Signal(SIGKILL));
    // Generous: the kernel detaches a dead process's BPF programs as it
    // exits, which an ASan build on a loaded machine once took over 10 s.
    if (!agent->WaitExit(absl::Seconds(60)).has_value()) {
      ADD_FAILURE() << "the killed agent " << dead << " did not exit within 60 s";
      return nullptr;
    }
    kills_++;
    const Left left = CheckWhatAKillLeft();
    if (!left.temporary.empty()) temporaries_left_++;
    std::unique_ptr<AgentProcess> next = StartReady();
    if (next == nullptr) return nullptr;
    CheckRecovered(left);
    for (const std::string& name : instances) {
      EXPECT_FALSE(InstanceExists(name))
          << "the instance " << name << " of the dead agent " << dead << " is still there";
    }
    absl::StatusOr<AgentLock::Holder> holder = ReadLockHolder(lock_path());
    EXPECT_TRUE(holder.ok()) << holder.status();
    if (holder.ok()) {
      EXPECT_EQ(holder->pid, next->pid());
    }
    return next;
  }

  // Whether every thread of `pid` is stopped (by SIGSTOP), waiting up to
  // 10 s for it: a thread in a system call stops as it returns.
  static bool AllThreadsStopped(pid_t pid) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    const std::string tasks = absl::StrCat("/proc/", pid, "/task");
    while (absl::Now() < deadline) {
      bool all = true;
      for (const std::string& tid : ListDir(tasks)) {
        const std::string stat = ReadAll(absl::StrCat(tasks, "/", tid, "/stat"));
        // "pid (comm) S ...": comm may hold spaces and parentheses.
        const size_t close = stat.rfind(") ");
        if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'T') {
          all = false;
          break;
        }
      }
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  // Stops `agent` (SIGSTOP) at a moment it is writing a stream file (a
  // ".partial" in out_), trying for up to 10 s. Between finishing one file
  // (its rename and the directory's fsync, tens of ms on a loaded disk) and
  // opening the next there is none, and a kill there leaves nothing to
  // recover: a look and then a kill lost that race now and then (2 of 6
  // kills once under ASan), so the look is made with the agent frozen.
  // Returns false, with the agent running again, if no moment was found.
  bool StopWhileWritingAFile(AgentProcess* agent) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (!agent->Signal(SIGSTOP) || !AllThreadsStopped(agent->pid())) break;
      for (const std::string& name : ListDir(out_)) {
        if (absl::EndsWith(name, ".pftrace.partial")) return true;
      }
      agent->Signal(SIGCONT);
      absl::SleepFor(absl::Milliseconds(Uniform(1, 20)));
    }
    agent->Signal(SIGCONT);
    return false;
  }

  void StopCleanly(std::unique_ptr<AgentProcess> agent) {
    ASSERT_NE(agent, nullptr);
    const std::set<std::string> instances = InstancesHeldBy(agent->pid());
    // Named after the agent, for whoever lists instances/ (issue 39: it was
    // "ringside-record2-...").
    for (const std::string& name : instances) {
      EXPECT_TRUE(absl::StartsWith(name, "ringside-agent-")) << name;
    }
    ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0) << agent->Log();
    ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());
    for (const std::string& name : instances) EXPECT_FALSE(InstanceExists(name)) << name;
    struct stat st;
    EXPECT_NE(lstat(lock_path().c_str(), &st), 0) << "a stopped agent left its lock file";
    EXPECT_NE(lstat(socket().c_str(), &st), 0) << "a stopped agent left its socket";
    for (const std::string& name : ListDir(out_)) {
      EXPECT_FALSE(absl::EndsWith(name, ".partial") ||
                   (absl::StartsWith(name, ".ringside-") && empty_temporaries_.count(name) == 0))
          << name;
    }
    std::cerr << kills_ << " kills, " << files_checked_ << " finished files checked whole ("
              << snapshots_checked_ << " snapshots), " << partials_checked_
              << " .partial files checked (" << partials_cut_ << " cut mid-packet, "
              << recovered_.size() << " recovered), " << temporaries_left_
              << " snapshot temporaries left by a kill (" << empty_temporaries_.size()
              << " empty, kept), seed " << seed_ << "\n";
  }

  ScratchDir dir_;
  std::string out_ = dir_.Join("out");
  std::string run_dir_ = dir_.Join("run");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  std::string config_;
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
  int starts_ = 0;

  std::set<std::string> checked_;    // Finished files already checked.
  std::set<std::string> recovered_;  // Kept from a .partial by a restart.
  // Empty temporaries (cut before their reserve), left for a later start.
  std::set<std::string> empty_temporaries_;
  int kills_ = 0;
  int files_checked_ = 0;
  int snapshots_checked_ = 0;
  int partials_checked_ = 0;
  int partials_cut_ = 0;
  int temporaries_left_ = 0;
};

// 6 kills (20 under `make test-long`).
TEST_F(AgentKillTest, KillsWhileStreamingLeaveWholeFilesAndAPartialTheNextAgentKeeps) {
  const int kills = ringside::testing::TestSize(6, 20);
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  std::unique_ptr<AgentProcess> agent = StartReady();
  for (int i = 0; i < kills && agent != nullptr && !HasFatalFailure(); i++) {
    SCOPED_TRACE(absl::StrCat("kill ", i + 1, ", seed ", seed_));
    absl::SleepFor(absl::Milliseconds(Uniform(300, 1500)));
    // Killed at random alone, half the kills of a flake check's run fell
    // between two files.
    EXPECT_TRUE(StopWhileWritingAFile(agent.get())) << "no file being written within 10 s";
    agent = KillAndRestart(std::move(agent));
  }
  ringside::testing::StopProcesses(storm);
  StopCleanly(std::move(agent));
  EXPECT_EQ(kills_, kills);
  // Each kill found the file it froze being written.
  EXPECT_EQ(partials_checked_, kills);
}

TEST_F(AgentKillTest, KillsMidSnapshotLeaveOnlyAHiddenTemporaryTheNextAgentRemoves) {
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  std::unique_ptr<AgentProcess> agent = StartReady();
  // A snapshot of the ring the storm filled for a second takes some tens of
  // ms here: the kills come within that, until at least 4 kills and 2 of
  // them cut a write, or 12 kills (under `make test-long`: 10 and 5, or 20).
  // (Half a second of the storm was enough until sched_waking went compact:
  // the smaller ring wrote faster, and 2 of 12 kills cut a write at best.)
  const int min_kills = ringside::testing::TestSize(4, 10);
  const int max_kills = ringside::testing::TestSize(12, 20);
  const int min_cut = ringside::testing::TestSize(2, 5);
  int i = 0;
  for (; i < max_kills && agent != nullptr && !HasFatalFailure(); i++) {
    if (i >= min_kills && temporaries_left_ >= min_cut) break;
    SCOPED_TRACE(absl::StrCat("kill ", i + 1, ", seed ", seed_));
    absl::SleepFor(absl::Milliseconds(Uniform(800, 1600)));
    absl::StatusOr<control::Reply> r = Ask(socket(), SnapshotRequest(kSnapshotReason, false));
    EXPECT_TRUE(r.ok()) << r.status();
    absl::SleepFor(absl::Milliseconds(Uniform(0, 40)));
    agent = KillAndRestart(std::move(agent));
  }
  ringside::testing::StopProcesses(storm);
  StopCleanly(std::move(agent));
  EXPECT_EQ(kills_, i);
  EXPECT_GE(temporaries_left_, min_cut) << "few of " << i << " kills landed in a snapshot write";
}

// kill -9 leaves the agent's tracefs instance (its owner's lock gone), its
// lock file and its socket; the next agent removes or replaces each, and a
// clean stop of that one leaves none of either. (ringside pins no BPF
// object: its programs and maps go with the process.)
TEST_F(AgentKillTest, ARestartAfterKillRemovesTheDeadAgentsInstanceLockAndSocket) {
  std::unique_ptr<AgentProcess> agent = StartReady();
  ASSERT_NE(agent, nullptr);
  const pid_t dead = agent->pid();
  const std::set<std::string> instances = InstancesHeldBy(dead);
  ASSERT_EQ(instances.size(), 1u);
  ASSERT_TRUE(agent->Signal(SIGKILL));
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(10)).has_value());
  // What the kill left.
  for (const std::string& name : instances) EXPECT_TRUE(InstanceExists(name)) << name;
  struct stat st;
  ASSERT_EQ(lstat(socket().c_str(), &st), 0) << "kill -9 left no socket to clean up";
  absl::StatusOr<AgentLock::Holder> holder = ReadLockHolder(lock_path());
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->pid, dead);

  std::unique_ptr<AgentProcess> next = StartReady();
  ASSERT_NE(next, nullptr);
  for (const std::string& name : instances) {
    EXPECT_FALSE(InstanceExists(name)) << "the dead agent's instance " << name << " is still there";
  }
  holder = ReadLockHolder(lock_path());
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->pid, next->pid());
  EXPECT_EQ(holder->socket, socket());
  // The socket answering is the new agent's (a new file: the dead one's was
  // replaced; inode numbers are reused too soon to tell them apart).
  absl::StatusOr<control::Reply> reply = Ask(socket(), StatusRequest());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().pid(), next->pid());
  EXPECT_TRUE(absl::StrContains(next->Log(), absl::StrCat("the agent of pid ", dead)))
      << next->Log();
  StopCleanly(std::move(next));
}

// The next agent need not use ftrace itself to clean up after a dead one
// (an instance left tracing keeps its per-CPU buffers and its events' cost
// in the kernel for as long as it is there), nor stream itself to keep the
// dead one's .partial file.
TEST_F(AgentKillTest, AnAgentWithoutFtraceStillRemovesADeadAgentsInstance) {
  std::unique_ptr<AgentProcess> agent = StartReady();
  ASSERT_NE(agent, nullptr);
  const std::set<std::string> instances = InstancesHeldBy(agent->pid());
  ASSERT_EQ(instances.size(), 1u);
  ASSERT_TRUE(agent->Signal(SIGKILL));
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(10)).has_value());
  for (const std::string& name : instances) ASSERT_TRUE(InstanceExists(name)) << name;

  std::ofstream(config_) << R"pb(
    buffers { size_kb: 4096 }
    data_sources { config { name: "linux.bpf" } }
  )pb";
  std::unique_ptr<AgentProcess> next = StartReady();
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(InstancesHeldBy(next->pid()).empty());
  for (const std::string& name : instances) {
    EXPECT_FALSE(InstanceExists(name)) << "the dead agent's instance " << name << " is still there";
    EXPECT_TRUE(absl::StrContains(next->Log(), name)) << next->Log();
  }
  // Nor stream itself to keep the dead agent's .partial file.
  EXPECT_TRUE(absl::StrContains(next->Log(), "kept 1 streaming file")) << next->Log();
  StopCleanly(std::move(next));
}

}  // namespace
}  // namespace ringside::agent::testing
