// Proofs of `ringside agent`'s snapshots on the real kernel, end to end:
// an OOM kill in a memory cgroup fires a snapshot holding the kill and the
// stop_delay_ms after it, with every pid named; manual snapshots taken in a
// row under load are whole files that overlap in time; and kill -9 at any
// moment of a snapshot's write never leaves part of a trace under a final
// name.

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/output/trace_sidecar.h"
#include "agent/snapshots/snapshot_retention.h"
#include "agent/tracefile/trace_file_reader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

// The agent's own data source only: BPF scheduling, processes and
// incidents, the durable store on (so every pid can resolve).
constexpr char kBaseConfig[] = R"pb(
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 256 }
    }
  }
  durable_buffer_size_kb: 1024
)pb";

// `config` (one with kBaseConfig's bpf_config) recording only the tasks of
// cgroup v2 `cgroup_path` (below the mount).
std::string FilteredTo(const std::string& config, const std::string& cgroup_path) {
  std::string filtered = config;
  absl::StrReplaceAll({{"bpf_config { ring_size_kb: 256 }",
                        absl::StrCat("bpf_config { ring_size_kb: 256 filter_cgroup_path: \"",
                                     cgroup_path, "\" }")}},
                      &filtered);
  return filtered;
}

uint64_t BootNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return f.good();
}

// The name OutputFile gives a file being written: mkostemp's
// ".ringside-XXXXXX" in the target's directory.
bool IsTemporaryName(const std::string& name) {
  if (!absl::StartsWith(name, ".ringside-") || name.size() != 16) return false;
  return std::all_of(name.begin() + 10, name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
}

// A name a reader takes for a finished trace.
bool IsFinalName(const std::string& name) {
  return name[0] != '.' && absl::EndsWith(name, ".pftrace");
}

std::set<std::string> FinalFiles(const std::string& dir) {
  std::set<std::string> out;
  for (const std::string& f : ListDir(dir)) {
    if (IsFinalName(f)) out.insert(f);
  }
  return out;
}

// A trace file read packet by packet, as `ringside inspect` reads it.
struct WholeTrace {
  // Empty when every packet decoded, the file ended at a packet boundary
  // and its last packet is the trace_stats a finished file ends with.
  std::string error;
  std::vector<trace::TracePacket> packets;
};

WholeTrace ReadWholeTrace(const std::string& path) {
  WholeTrace out;
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
  if (!reader.ok()) {
    out.error = reader.status().ToString();
    return out;
  }
  std::string bytes;
  uint64_t offset = 0;
  for (;;) {
    const TraceFileReader::Result r = (*reader)->ReadNextPacket(&bytes, &offset);
    if (r == TraceFileReader::Result::kEnd) break;
    if (r == TraceFileReader::Result::kError) {
      out.error =
          absl::StrCat("byte ", (*reader)->error_offset(), ": ", (*reader)->error(), " (after ",
                       out.packets.size(), " packets of ", (*reader)->file_size(), " bytes)");
      return out;
    }
    trace::TracePacket p;
    if (!p.ParseFromString(bytes)) {
      out.error = absl::StrCat("the packet at byte ", offset, " does not decode");
      return out;
    }
    out.packets.push_back(std::move(p));
  }
  if (out.packets.empty()) {
    out.error = "no packets";
  } else if (!out.packets.back().has_trace_stats()) {
    out.error = absl::StrCat("the last of ", out.packets.size(), " packets is no trace_stats");
  }
  return out;
}

std::vector<trace::TracePacket> CloneTriggers(const WholeTrace& t) {
  std::vector<trace::TracePacket> out;
  for (const trace::TracePacket& p : t.packets) {
    if (p.has_clone_snapshot_trigger()) out.push_back(p);
  }
  return out;
}

// Calls `f` with the time of every event in `p`: the ftrace-form events and
// the compact scheduling columns (deltas, the first from zero).
template <typename F>
void ForEachEventTime(const trace::TracePacket& p, F f) {
  if (!p.has_ftrace_events()) return;
  for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
    if (e.has_timestamp()) f(e.timestamp());
  }
  const auto& compact = p.ftrace_events().compact_sched();
  for (const auto* deltas : {&compact.switch_timestamp(), &compact.waking_timestamp()}) {
    uint64_t ts = 0;
    for (uint64_t delta : *deltas) {
      ts += delta;
      f(ts);
    }
  }
}

struct TimeRange {
  uint64_t first_ns = UINT64_MAX;
  uint64_t last_ns = 0;
  uint64_t events = 0;
};

TimeRange EventRange(const WholeTrace& t) {
  TimeRange r;
  for (const trace::TracePacket& p : t.packets) {
    ForEachEventTime(p, [&](uint64_t ts) {
      r.first_ns = std::min(r.first_ns, ts);
      r.last_ns = std::max(r.last_ns, ts);
      r.events++;
    });
  }
  return r;
}

// `ringside inspect --json FILE`, parsed; a discarded value if it printed
// no JSON.
nlohmann::json Inspect(const std::string& path, int* code) {
  return nlohmann::json::parse(RunRingsideCapture({"inspect", "--json", path}, code), nullptr,
                               /*allow_exceptions=*/false);
}

// Checks what `ringside inspect` says of a snapshot: it reads whole, and
// every pid of a scheduling event has a name.
void ExpectInspectReadsItWholeWithEveryPidNamed(const std::string& path) {
  int code = -1;
  const nlohmann::json j = Inspect(path, &code);
  EXPECT_EQ(code, 0) << path;
  ASSERT_TRUE(j.is_object()) << path;
  EXPECT_TRUE(j["error"].is_null()) << path << ": " << j["error"].dump();
  EXPECT_GT(j["sched_pids"]["seen"].get<int64_t>(), 0) << path;
  EXPECT_EQ(j["sched_pids"]["unresolved"], 0)
      << path << ": unresolved pids " << j["sched_pids"]["unresolved_pids"].dump();
  EXPECT_EQ(j["packets_by_type"]["clone_snapshot_trigger"], 1) << path;
}

// A memory cgroup of the test's own (v1's memory controller, or cgroup2's),
// limited to `limit_bytes` with no swap, removed at the end once its
// processes are gone.
class ScopedMemoryCgroup {
 public:
  explicit ScopedMemoryCgroup(uint64_t limit_bytes) {
    std::string v1, v2;
    std::ifstream mounts("/proc/mounts");
    std::string dev, dir, type, opts, rest;
    while (mounts >> dev >> dir >> type >> opts) {
      std::getline(mounts, rest);
      if (type == "cgroup2" && v2.empty()) v2 = dir;
      if (type == "cgroup") {
        for (absl::string_view o : absl::StrSplit(opts, ',')) {
          if (o == "memory") v1 = dir;
        }
      }
    }
    const bool is_v1 = !v1.empty();
    const std::string parent = is_v1 ? v1 : v2;
    if (parent.empty()) {
      missing_ = "no cgroup hierarchy with the memory controller is mounted";
      return;
    }
    if (!is_v1) {
      std::ifstream controllers(parent + "/cgroup.subtree_control");
      std::string all((std::istreambuf_iterator<char>(controllers)), {});
      bool memory = false;
      for (absl::string_view c : absl::StrSplit(all, absl::ByAnyChar(" \n"))) {
        memory |= c == "memory";
      }
      if (!memory) {
        missing_ = absl::StrCat("the cgroup2 hierarchy at ", parent,
                                " does not enable the memory controller for its children "
                                "(cgroup.subtree_control), and no v1 memory hierarchy is mounted");
        return;
      }
    }
    const std::string path = absl::StrCat(parent, "/ringside-proof-", getpid());
    if (mkdir(path.c_str(), 0755) != 0) {
      if (errno == EACCES || errno == EPERM || errno == EROFS) {
        missing_ = absl::StrCat("cannot create a cgroup in ", parent, ": ", std::strerror(errno));
      } else {
        error_ = absl::StrCat("mkdir ", path, ": ", std::strerror(errno));
      }
      return;
    }
    path_ = path;
    if (!is_v1) v2_path_ = path.substr(parent.size());
    const std::string limit = is_v1 ? "/memory.limit_in_bytes" : "/memory.max";
    if (!WriteFile(path_ + limit, std::to_string(limit_bytes))) {
      error_ = absl::StrCat("cannot write ", path_, limit);
      return;
    }
    // No swapping out of the limit, where the kernel offers the knob.
    WriteFile(path_ + (is_v1 ? "/memory.memsw.limit_in_bytes" : "/memory.swap.max"),
              is_v1 ? std::to_string(limit_bytes) : "0");
  }

  ~ScopedMemoryCgroup() {
    if (path_.empty()) return;
    // A killed task leaves the cgroup a moment after its parent reaped it.
    for (int i = 0; i < 200 && rmdir(path_.c_str()) != 0 && errno == EBUSY; i++) usleep(10000);
    struct stat st;
    EXPECT_NE(stat(path_.c_str(), &st), 0) << "cgroup " << path_ << " left behind";
  }

  // What this machine lacks for a memory cgroup; empty when there is one
  // (or when creating it failed for another reason: error()).
  const std::string& missing() const { return missing_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // Below the cgroup2 mount, as a config names it; empty on cgroup v1.
  const std::string& v2_path() const { return v2_path_; }
  bool Add(pid_t pid) const { return WriteFile(path_ + "/cgroup.procs", std::to_string(pid)); }

 private:
  std::string path_;
  std::string v2_path_;
  std::string missing_;
  std::string error_;
};

// A child named `comm` that waits for Go(), then touches `bytes` of
// anonymous memory page by page (raw system calls only: the test process
// has threads).
class MemoryHog {
 public:
  MemoryHog(const char* comm, size_t bytes) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[1]);
      prctl(PR_SET_NAME, comm, 0, 0, 0);
      char c;
      if (read(fds[0], &c, 1) != 1) _exit(100);
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) _exit(2);
      for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
      _exit(3);
    }
    close(fds[0]);
    go_fd_ = fds[1];
  }
  ~MemoryHog() {
    if (go_fd_ >= 0) close(go_fd_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool Go() {
    const char c = 1;
    const bool ok = write(go_fd_, &c, 1) == 1;
    close(go_fd_);
    go_fd_ = -1;
    return ok;
  }
  // Its wait status once it ended.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;
};

// A child that wakes every 2 ms until the test ends it: a steady trickle of
// scheduling events.
class Ticker {
 public:
  Ticker() {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      prctl(PR_SET_NAME, "rs-ticker", 0, 0, 0);
      const struct timespec two_ms = {0, 2'000'000};
      for (;;) nanosleep(&two_ms, nullptr);
    }
  }
  ~Ticker() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Load the test starts and ends: pairs of processes passing a byte over
// pipes (context switches and wakeups), and, with `forker`, a process that
// forks short-lived children one after another (pids come and go).
class ScopedLoad {
 public:
  // With `cgroup_procs` (a cgroup.procs file), every process of the load
  // runs in that cgroup.
  ScopedLoad(int pipe_pairs, bool forker, const std::string& cgroup_procs = "") {
    storm_ = ringside::testing::StartPipeStorm(pipe_pairs);
    for (pid_t pid : storm_) {
      if (!cgroup_procs.empty()) moved_ &= WriteFile(cgroup_procs, std::to_string(pid));
    }
    if (!forker) return;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    forker_ = fork();
    if (forker_ == 0) {
      close(fds[1]);
      fcntl(fds[0], F_SETFL, O_NONBLOCK);
      prctl(PR_SET_NAME, "rs-forker", 0, 0, 0);
      char c;
      // Until the test closes its end of the pipe.
      while (read(fds[0], &c, 1) != 0) {
        const pid_t child = fork();
        if (child == 0) _exit(0);
        if (child > 0) waitpid(child, nullptr, 0);
        usleep(2000);
      }
      _exit(0);
    }
    close(fds[0]);
    stop_fd_ = fds[1];
    if (!cgroup_procs.empty()) moved_ &= WriteFile(cgroup_procs, std::to_string(forker_));
  }
  ~ScopedLoad() { Stop(); }
  // False if a process could not be moved into the cgroup asked for.
  bool moved() const { return moved_; }
  void Stop() {
    ringside::testing::StopProcesses(storm_);
    storm_.clear();
    if (stop_fd_ >= 0) close(stop_fd_);
    stop_fd_ = -1;
    if (forker_ > 0) waitpid(forker_, nullptr, 0);
    forker_ = -1;
  }
  const std::vector<pid_t>& storm() const { return storm_; }

 private:
  std::vector<pid_t> storm_;
  pid_t forker_ = -1;
  int stop_fd_ = -1;
  bool moved_ = true;
};

// The names created in, or renamed into, a directory from now on, as they
// come (inotify).
class DirWatch {
 public:
  explicit DirWatch(const std::string& dir) {
    fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd_ >= 0 && inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~DirWatch() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // The next name that appeared, within `timeout`; empty if none did.
  std::string Next(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (pending_.empty()) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms < 0) return "";
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
      alignas(inotify_event) char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      for (ssize_t at = 0; n > 0 && at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        if (e->len > 0) pending_.push_back(e->name);
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    std::string name = pending_.front();
    pending_.erase(pending_.begin());
    return name;
  }

 private:
  int fd_ = -1;
  std::vector<std::string> pending_;
};

class AgentSnapshotProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's BPF programs need root";
    struct stat st;
    if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
      GTEST_SKIP() << "the agent's BPF programs need the kernel's BTF (/sys/kernel/btf/vmlinux)";
    }
    config_ = dir_.Join("agent.pbtxt");
    mkdir(dir_.Join("run").c_str(), 0755);
  }

  std::vector<std::string> Args(const std::string& config = "") const {
    return {"-c",           config.empty() ? config_ : config,
            "--socket",     socket(),
            "--run-dir",    dir_.Join("run"),
            "--output-dir", snaps()};
  }
  std::string socket() const { return dir_.Join("control.sock"); }
  std::string snaps() const { return dir_.Join("snaps"); }

  // Starts an agent and waits for READY=1.
  std::unique_ptr<AgentProcess> StartReady(const std::vector<std::string>& args) {
    auto agent = std::make_unique<AgentProcess>(
        args, dir_.Join(absl::StrCat("agent", n_++, ".log")), notify_.path());
    const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
    EXPECT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
    return agent;
  }

  ScratchDir dir_;
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  std::string config_;
  int n_ = 0;
};

// The OOM killer ends a process in a 32 MiB cgroup; the agent, told by its
// BPF incident program, writes one snapshot stop_delay_ms later holding the
// kill, the aftermath up to the delay, and a name for every pid.
TEST_F(AgentSnapshotProofTest, AnOomKillFiresOneSnapshotHoldingTheKillAndItsAftermath) {
  constexpr uint32_t kStopDelayMs = 1000;
  constexpr char kVictim[] = "rs-oom-victim";
  ScopedMemoryCgroup cg(32 << 20);
  if (!cg.missing().empty()) GTEST_SKIP() << "needs a memory cgroup: " << cg.missing();
  ASSERT_TRUE(cg.error().empty()) << cg.error();
  // Only our victim fires it: other OOM kills on the machine are not ours.
  // The agent records only the cgroup, where a ticker goes on after the
  // kill, so that the 8 MiB ring holds the kill and the second after it
  // whatever else the machine does (a whole loaded machine wrapped it
  // within the second, and the kill was gone from the file).
  // With the memory controller on cgroup v1 (hybrid systems), the victim
  // and the ticker are also put in a cgroup2 cgroup of their own, recorded
  // alone.
  std::optional<testing::ScratchCgroup> v2;
  if (cg.v2_path().empty()) v2.emplace("oom");
  const std::string filter = !cg.v2_path().empty() ? cg.v2_path() : v2->ok() ? v2->path() : "";
  const std::string base =
      filter.empty() ? std::string(kBaseConfig) : FilteredTo(kBaseConfig, filter);
  Ticker ticker;
  ASSERT_TRUE(cg.Add(ticker.pid())) << cg.path();
  if (v2.has_value() && v2->ok()) {
    ASSERT_TRUE(WriteFile(v2->dir() + "/cgroup.procs", std::to_string(ticker.pid())));
  }
  ASSERT_TRUE(
      WriteFile(config_, absl::StrCat("buffers { size_kb: 8192 }\n", base,
                                      "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers {\n"
                                      "  name: \"oom\" stop_delay_ms: ",
                                      kStopDelayMs, "\n  incident { kinds: OOM_KILL comms: \"",
                                      kVictim, "\" } } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());

  MemoryHog hog(kVictim, 256 << 20);
  ASSERT_GT(hog.pid(), 0);
  const pid_t victim = hog.pid();
  ASSERT_TRUE(cg.Add(victim)) << cg.path();
  if (v2.has_value() && v2->ok()) {
    ASSERT_TRUE(WriteFile(v2->dir() + "/cgroup.procs", std::to_string(victim)));
  }
  ASSERT_TRUE(hog.Go());
  const int status = hog.Wait();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the hog was not OOM-killed in " << cg.path() << " (wait status " << status << ")";

  // Polled finely: when it shows up bounds when it was renamed into place.
  std::set<std::string> files;
  uint64_t seen_ns = 0;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(kStopDelayMs) + absl::Seconds(20);
  while (files.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    files = FinalFiles(snaps());
    seen_ns = BootNs();
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  const std::string path = snaps() + "/" + *files.begin();
  EXPECT_TRUE(absl::EndsWith(path, "-oom.pftrace")) << path;
  EXPECT_TRUE(IsSnapshotFileName(*files.begin(), Hostname())) << path;

  const WholeTrace t = ReadWholeTrace(path);
  ASSERT_TRUE(t.error.empty()) << path << ": " << t.error;
  std::vector<uint64_t> kills;
  std::vector<int32_t> other_kills;  // For the failure message.
  bool victim_named = false;
  for (const trace::TracePacket& p : t.packets) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.has_mark_victim() && e.mark_victim().pid() == victim) kills.push_back(e.timestamp());
      if (e.has_mark_victim() && e.mark_victim().pid() != victim) {
        other_kills.push_back(e.mark_victim().pid());
      }
      victim_named |= e.has_sched_process_fork() && e.sched_process_fork().child_pid() == victim;
      victim_named |= e.has_task_newtask() && e.task_newtask().pid() == victim;
    }
    for (const auto& th : p.process_tree().threads()) victim_named |= th.tid() == victim;
    for (const auto& pr : p.process_tree().processes()) victim_named |= pr.pid() == victim;
  }
  ASSERT_EQ(kills.size(), 1u) << "OOM kills of pid " << victim << " in " << path
                              << " (other OOM kills: " << absl::StrJoin(other_kills, ", ")
                              << "; events from " << EventRange(t).first_ns << " to "
                              << EventRange(t).last_ns << "); the agent said:\n"
                              << agent->Log();
  const uint64_t kill_ns = kills[0];
  EXPECT_TRUE(victim_named) << "the victim " << victim << " has no name in " << path;

  const std::vector<trace::TracePacket> triggers = CloneTriggers(t);
  ASSERT_EQ(triggers.size(), 1u) << path;
  EXPECT_EQ(triggers[0].clone_snapshot_trigger().trigger_name(), "oom");
  EXPECT_EQ(triggers[0].clone_snapshot_trigger().producer_name(), "linux.bpf");
  EXPECT_EQ(triggers[0].timestamp(), kill_ns) << "the trigger is not at the kill's time";

  // The delay is served: nothing in place before it, and the file holds
  // what happened until it (10% slack for where the last event falls).
  const uint64_t delay_ns = uint64_t{kStopDelayMs} * 1000000;
  EXPECT_GE(seen_ns, kill_ns + delay_ns)
      << "the snapshot was in place " << (seen_ns - kill_ns) / 1000000 << " ms after the kill";
  EXPECT_LE(seen_ns, kill_ns + delay_ns + 15'000'000'000ull)
      << "the snapshot took " << (seen_ns - kill_ns) / 1000000 << " ms after the kill";
  const TimeRange range = EventRange(t);
  EXPECT_LT(range.first_ns, kill_ns);
  EXPECT_GE(range.last_ns, kill_ns + delay_ns * 9 / 10)
      << "the last event is "
      << (static_cast<int64_t>(range.last_ns) - static_cast<int64_t>(kill_ns)) / 1000000
      << " ms after the kill; the trigger waits " << kStopDelayMs << " ms";
  std::printf("OOM kill of pid %d: snapshot in place %llu ms after it, last event %llu ms after\n",
              victim, static_cast<unsigned long long>((seen_ns - kill_ns) / 1000000),
              static_cast<unsigned long long>((range.last_ns - kill_ns) / 1000000));

  ExpectInspectReadsItWholeWithEveryPidNamed(path);
  EXPECT_TRUE(absl::StrContains(
      agent->Log(),
      absl::StrCat("trigger oom from the kernel (oom_kill of pid ", victim, " ", kVictim, ")")))
      << agent->Log();
  // One kill, one file, still.
  EXPECT_EQ(FinalFiles(snaps()).size(), 1u);
}

// Issue 39: a flight recorder's config that leaves durable_buffer_size_kb
// out. A process that came after the agent started lives while the ring
// wraps past its first event (its rename), and ends just before a crash
// fires a snapshot. Its last scheduling events are in the snapshot, so it
// must have its process there too. Without the durable store (then off
// unless asked for) the snapshot named only the processes alive when it
// was written (a fresh /proc scan), and those whose fork or exec the ring
// still held: `inspect` counted it, and the load's processes, without a
// name; trace_processor gave their threads no process.
TEST_F(AgentSnapshotProofTest,
       ACrashSnapshotNamesAProcessThatEndedBeforeItWhoseFirstEventTheRingOverwrote) {
  testing::ScratchCgroup cgroup("wrap");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  ASSERT_TRUE(WriteFile(
      config_, absl::StrCat("buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
                            "data_sources { config { name: \"linux.bpf\"\n"
                            "  bpf_config { ring_size_kb: 256 filter_cgroup_path: \"",
                            cgroup.path(),
                            "\" } } }\n"
                            "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers {\n"
                            "  name: \"crash\" stop_delay_ms: 500\n"
                            "  incident { kinds: FATAL_SIGNAL comms: \"rs-wrap-crash\" } } }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  const std::string procs = cgroup.dir() + "/cgroup.procs";
  const pid_t ticker = ringside::testing::StartTicker("rs-long-lived", procs);
  ASSERT_GT(ticker, 0);
  ringside::testing::ScopedProcesses ticking({ticker});
  ScopedLoad load(2, /*forker=*/false, procs);
  ASSERT_TRUE(load.moved());
  // Until the ring has wrapped past the ticker's first events twice over.
  uint64_t wraps = 0;
  for (int i = 0; i < 600 && wraps < 3; i++) {
    absl::StatusOr<control::Reply> st = Ask(socket(), StatusRequest());
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_EQ(st->status().buffers_size(), 1);
    wraps = st->status().buffers(0).write_wraps();
    if (wraps < 3) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GE(wraps, 3u) << "the load did not wrap the 1 MiB ring in 60 s";
  // The ticker ends, then the load, then the crash: the ring stops
  // filling with the load, so it keeps the ticker's last events. (With the
  // crash before the load's end, a loaded machine took longer to fork and
  // reap the crasher than the ring holds of the load, a few hundred
  // milliseconds, and the ring wrapped past them: seen once in a flake
  // check beside hackbench and four QEMU VMs.)
  ticking.Stop();
  load.Stop();
  ASSERT_EQ(ringside::testing::Crash(1, "rs-wrap-crash", procs).size(), 1u);
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    files = FinalFiles(snaps());
  }
  ASSERT_EQ(files.size(), 1u) << agent->Log();
  const std::string path = snaps() + "/" + *files.begin();
  ExpectInspectReadsItWholeWithEveryPidNamed(path);

  // The ticker is in the file's scheduling events, its rename is not (the
  // ring overwrote it), and a descriptor names its process and thread
  // (ended: it is in no /proc scan of the snapshot's time).
  const WholeTrace t = ReadWholeTrace(path);
  ASSERT_TRUE(t.error.empty()) << t.error;
  bool scheduled = false, renamed = false, process = false;
  std::string thread_name;
  for (const trace::TracePacket& p : t.packets) {
    for (const auto& pr : p.process_tree().processes()) process |= pr.pid() == ticker;
    for (const auto& th : p.process_tree().threads()) {
      if (th.tid() == ticker) thread_name = th.name();
    }
    for (int32_t pid : p.ftrace_events().compact_sched().switch_next_pid()) {
      scheduled |= pid == ticker;
    }
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      renamed |= e.has_task_rename() && e.task_rename().pid() == ticker;
    }
  }
  EXPECT_TRUE(scheduled) << "the ticker " << ticker << " never ran in the snapshot's window";
  EXPECT_FALSE(renamed) << "the ring still held the ticker's rename: it did not wrap past it";
  EXPECT_TRUE(process) << "no process descriptor of the ticker " << ticker;
  EXPECT_EQ(thread_name, "rs-long-lived");
}

// `snapshot --wait` three times in a row while processes switch, wake and
// fork: three whole files, each its own, each a moment later than the one
// before and overlapping it.
//
// The agent records only the load's cgroup: each snapshot must overlap the
// one before, so the ring must not wrap between two of them, which the rest
// of a loaded machine made it do (snapshot 2 began 240 ms after snapshot 1
// ended, with another test's pipe storm beside it). 64 MiB hold some 10 s
// of the load alone (16 MiB wrapped while a snapshot took 2.3 s to write
// on a busy disk).
TEST_F(AgentSnapshotProofTest, ThreeSnapshotsInARowUnderLoadAreWholeDistinctAndOverlap) {
  testing::ScratchCgroup cgroup("load");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  // Back to back, as fast as each is written: no request limit.
  ASSERT_TRUE(WriteFile(
      config_, absl::StrCat("buffers { size_kb: 65536 }\n", "snapshot_request_cooldown_ms: 0\n",
                            FilteredTo(kBaseConfig, cgroup.path()))));
  std::unique_ptr<AgentProcess> agent = StartReady(Args());
  ScopedLoad load(/*pipe_pairs=*/1, /*forker=*/true, cgroup.dir() + "/cgroup.procs");
  ASSERT_TRUE(load.moved()) << cgroup.dir();
  ASSERT_EQ(load.storm().size(), 2u);
  absl::SleepFor(absl::Milliseconds(1500));

  const std::set<int32_t> storm(load.storm().begin(), load.storm().end());
  std::vector<std::string> paths;
  for (int i = 0; i < 3; i++) {
    const absl::Time asked = absl::Now();
    // One reason for all three: within a second they need names of their own.
    absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("proof", /*wait=*/true));
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_TRUE(reply->has_snapshot()) << reply->error();
    std::printf("snapshot %d written in %lld ms\n", i + 1,
                static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - asked)));
    paths.push_back(reply->snapshot().path());
  }
  load.Stop();

  EXPECT_EQ(std::set<std::string>(paths.begin(), paths.end()).size(), 3u)
      << absl::StrJoin(paths, ", ");
  // Nothing else in the directory: no temporary file left; each file with
  // its sidecar, written before the reply.
  const std::set<std::string> in_dir = ListDir(snaps());
  EXPECT_EQ(in_dir.size(), 6u) << absl::StrJoin(in_dir, ", ");
  for (const std::string& path : paths) {
    EXPECT_EQ(in_dir.count(path.substr(path.find_last_of('/') + 1) + ".json"), 1u) << path;
  }
  std::vector<TimeRange> ranges;
  std::vector<uint64_t> trigger_ns;
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    ASSERT_TRUE(absl::StartsWith(path, snaps() + "/"));
    const std::string name = path.substr(snaps().size() + 1);
    EXPECT_TRUE(IsSnapshotFileName(name, Hostname()));
    EXPECT_TRUE(absl::EndsWith(name, "proof.pftrace") || absl::StrContains(name, "proof-"));
    EXPECT_EQ(in_dir.count(name), 1u);
    const WholeTrace t = ReadWholeTrace(path);
    ASSERT_TRUE(t.error.empty()) << t.error;
    const std::vector<trace::TracePacket> triggers = CloneTriggers(t);
    ASSERT_EQ(triggers.size(), 1u);
    EXPECT_EQ(triggers[0].clone_snapshot_trigger().trigger_name(), "proof");
    EXPECT_EQ(triggers[0].clone_snapshot_trigger().producer_name(), "ringside snapshot");
    trigger_ns.push_back(triggers[0].timestamp());
    // The load is in it.
    int storm_switches = 0;
    for (const trace::TracePacket& p : t.packets) {
      for (int32_t pid : p.ftrace_events().compact_sched().switch_next_pid()) {
        storm_switches += storm.count(pid) > 0;
      }
    }
    EXPECT_GT(storm_switches, 1000);
    ranges.push_back(EventRange(t));
    ExpectInspectReadsItWholeWithEveryPidNamed(path);
  }
  for (size_t i = 1; i < ranges.size(); i++) {
    SCOPED_TRACE(absl::StrCat("snapshots ", i, " and ", i + 1));
    // A later moment...
    EXPECT_GT(trigger_ns[i], trigger_ns[i - 1]);
    EXPECT_GT(ranges[i].last_ns, ranges[i - 1].last_ns);
    EXPECT_GT(ranges[i].last_ns, trigger_ns[i - 1]);
    // ...of the same recording: it starts before the previous one ends.
    EXPECT_LT(ranges[i].first_ns, ranges[i - 1].last_ns);
  }
}

// kill -9 of the agent at a random moment of a snapshot (from the request
// on, or from the moment its temporary file appears), again and again on one
// output directory: every file under a final name is a whole trace; what a
// kill cut short is only ever under a temporary name. The next agent leaves
// those temporaries where they are.
TEST_F(AgentSnapshotProofTest, KillNineDuringASnapshotWriteLeavesNoPartFileUnderAFinalName) {
  // A big buffer makes the write last long enough to be cut.
  ASSERT_TRUE(WriteFile(config_, absl::StrCat("buffers { size_kb: 65536 }\n", kBaseConfig)));
  const std::string host = Hostname();
  uint32_t seed = static_cast<uint32_t>(absl::ToUnixNanos(absl::Now()));
  if (const char* s = getenv("RINGSIDE_TEST_SEED")) {
    ASSERT_TRUE(absl::SimpleAtoi(s, &seed)) << s;
  }
  SCOPED_TRACE(absl::StrCat("seed ", seed, " (RINGSIDE_TEST_SEED to replay)"));
  std::mt19937 random(seed);
  ScopedLoad load(/*pipe_pairs=*/1, /*forker=*/true);
  constexpr absl::Duration kFill = absl::Milliseconds(400);

  // When, after a request (the command line, as the kills below ask), the
  // file being written appears under its temporary name and when under its
  // final one, to aim the kills at that window.
  ASSERT_EQ(mkdir(snaps().c_str(), 0750), 0);
  int64_t temp_ms = 0, final_ms = 0;
  {
    std::unique_ptr<AgentProcess> agent = StartReady(Args());
    absl::SleepFor(kFill);
    DirWatch watch(snaps());
    ASSERT_TRUE(watch.ok());
    const absl::Time asked = absl::Now();
    ASSERT_EQ(RunRingside({"snapshot", "--reason", "kill9", "--socket", socket()}), 0)
        << agent->Log();
    for (std::string name; final_ms == 0 && !(name = watch.Next(absl::Seconds(30))).empty();) {
      const int64_t ms = absl::ToInt64Milliseconds(absl::Now() - asked);
      if (IsTemporaryName(name)) temp_ms = ms;
      if (IsFinalName(name)) final_ms = ms;
    }
    ASSERT_GT(final_ms, 0) << "no snapshot file: " << agent->Log();
  }
  // Kills at random from the request on, over the whole of it; and kills
  // at random within the write, once the temporary file is there.
  const int64_t request_window_ms = std::max<int64_t>(20, final_ms * 3 / 2);
  const int64_t write_window_ms = std::max<int64_t>(2, (final_ms - temp_ms) * 3 / 2);

  std::set<std::string> checked;  // Final names already read whole (or failed).
  std::set<std::string> temporaries;
  int before_write = 0, mid_write = 0, after_write = 0, iterations = 0;
  // At least 20 kills, and on until a few of them cut a write (or 36).
  while (iterations < 20 || (mid_write < 3 && iterations < 36)) {
    iterations++;
    const bool into_write = iterations % 2 == 0;
    const int64_t delay_ms = std::uniform_int_distribution<int64_t>(
        0, into_write ? write_window_ms : request_window_ms)(random);
    SCOPED_TRACE(absl::StrCat("kill ", iterations, ", ", delay_ms, " ms after ",
                              into_write ? "the temporary file appeared" : "the request"));
    std::unique_ptr<AgentProcess> agent = StartReady(Args());
    // It removed what the agent killed before it left (bar an empty file,
    // which may be a writer's that has not locked it yet).
    for (const std::string& name : ListDir(snaps())) {
      struct stat st;
      if (IsTemporaryName(name) && stat((snaps() + "/" + name).c_str(), &st) == 0) {
        EXPECT_EQ(st.st_size, 0) << "a killed agent's temporary survived the next start: " << name;
      }
    }
    const std::set<std::string> before = ListDir(snaps());
    absl::SleepFor(kFill);
    DirWatch watch(snaps());
    ASSERT_TRUE(watch.ok());
    pid_t client = -1;
    RunRingside({"snapshot", "--reason", "kill9", "--socket", socket()}, &client, /*wait=*/false);
    ASSERT_GT(client, 0);
    if (into_write) {
      std::string name;
      while (!(name = watch.Next(absl::Seconds(30))).empty() && !IsTemporaryName(name)) {
      }
      EXPECT_FALSE(name.empty()) << "no temporary file: " << agent->Log();
    }
    absl::SleepFor(absl::Milliseconds(delay_ms));
    const bool killed = agent->Signal(SIGKILL);
    const std::optional<int> status = agent->WaitExit(absl::Seconds(10));
    // The client gets its error (or its path) once the agent is gone.
    waitpid(client, nullptr, 0);
    ASSERT_TRUE(killed && status.has_value() && WIFSIGNALED(*status) &&
                WTERMSIG(*status) == SIGKILL)
        << "the agent ended before the kill: " << agent->Log();

    int new_final = 0, new_temp = 0;
    for (const std::string& name : ListDir(snaps())) {
      if (IsFinalName(name)) {
        if (checked.count(name)) continue;
        new_final += !before.count(name);
        EXPECT_TRUE(IsSnapshotFileName(name, host)) << name;
        const WholeTrace t = ReadWholeTrace(snaps() + "/" + name);
        std::string error = t.error;
        if (error.empty() && CloneTriggers(t).size() != 1) {
          error = absl::StrCat(CloneTriggers(t).size(), " clone_snapshot_trigger packets");
        }
        EXPECT_EQ(error, "") << "a final name holds no whole trace: " << name;
        checked.insert(name);
      } else if (IsTemporaryName(name)) {
        new_temp += temporaries.insert(name).second;
      } else if (IsSidecarOrItsTemporary(name)) {
        // A snapshot's sidecar (or one being written), after the snapshot.
        const std::string trace = absl::StartsWith(name, ".") ? name.substr(1, name.size() - 1 - 9)
                                                              : name.substr(0, name.size() - 5);
        EXPECT_TRUE(IsSnapshotFileName(trace, host)) << name;
      } else {
        ADD_FAILURE() << "neither a snapshot, a sidecar nor a temporary name: " << name;
      }
    }
    EXPECT_LE(new_final + new_temp, 1) << "one request, more than one file";
    if (new_temp > 0) {
      mid_write++;
    } else if (new_final > 0) {
      after_write++;
    } else {
      before_write++;
    }
  }
  std::printf(
      "seed %u: the file is there %lld ms after the request, %lld ms under a temporary name; "
      "%d kills (half within 0..%lld ms of the request, half within 0..%lld ms of the "
      "temporary): %d before its file, %d mid-write, %d after\n",
      seed, static_cast<long long>(final_ms), static_cast<long long>(final_ms - temp_ms),
      iterations, static_cast<long long>(request_window_ms),
      static_cast<long long>(write_window_ms), before_write, mid_write, after_write);
  // Else the kills never landed where this test looks.
  EXPECT_GE(mid_write, 1);

  // The next agent on the directory removes what the killed ones left, and
  // nothing else: not a temporary a live writer holds (`ringside record`
  // may write one there), not a symlink named like one.
  // (An empty one, killed between its creation and its reserve, may be a
  // writer about to lock it: it is left for a minute.)
  int64_t allocated = 0;
  std::set<std::string> expected_left = {".ringside-Link01", ".ringside-Live01"};
  std::set<std::string> dead;  // The last kill's, and empty ones.
  for (const std::string& name : ListDir(snaps())) {
    if (IsTemporaryName(name)) dead.insert(name);
  }
  for (const std::string& name : dead) {
    struct stat st;
    ASSERT_EQ(stat((snaps() + "/" + name).c_str(), &st), 0) << name;
    allocated += int64_t{st.st_blocks} * 512;
    if (st.st_size == 0) expected_left.insert(name);
  }
  const size_t expected_removed = dead.size() + 2 - expected_left.size();
  const std::string live = snaps() + "/.ringside-Live01";
  ASSERT_TRUE(WriteFile(live, "being written"));
  const int live_fd = open(live.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(live_fd, 0);
  ASSERT_EQ(flock(live_fd, LOCK_EX), 0);
  const std::string outside = dir_.Join("not-ours");
  ASSERT_TRUE(WriteFile(outside, "keep me"));
  const std::string link = snaps() + "/.ringside-Link01";
  ASSERT_EQ(symlink(outside.c_str(), link.c_str()), 0);

  const std::string retaining = dir_.Join("retaining.pbtxt");
  ASSERT_TRUE(WriteFile(retaining, absl::StrCat("buffers { size_kb: 65536 }\n", kBaseConfig,
                                                "max_snapshot_files: 1\n")));
  std::unique_ptr<AgentProcess> agent = StartReady(Args(retaining));
  absl::StatusOr<control::Reply> reply = Ask(socket(), SnapshotRequest("after", true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_snapshot()) << reply->error();
  ASSERT_TRUE(agent->Signal(SIGTERM));
  const std::optional<int> exit = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value() && WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << agent->Log();
  const std::set<std::string> finals = FinalFiles(snaps());
  ASSERT_EQ(finals.size(), 1u) << absl::StrJoin(finals, ", ");
  EXPECT_EQ(snaps() + "/" + *finals.begin(), reply->snapshot().path());
  std::set<std::string> left;
  for (const std::string& name : ListDir(snaps())) {
    if (IsTemporaryName(name)) left.insert(name);
  }
  EXPECT_EQ(left, expected_left);
  if (expected_removed > 0) {
    EXPECT_TRUE(absl::StrContains(
        agent->Log(), absl::StrCat("removed ", expected_removed, " unfinished snapshot file")))
        << agent->Log();
  }
  std::ifstream kept(outside);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep me");
  close(live_fd);
  unlink(live.c_str());
  unlink(link.c_str());
  std::printf(
      "%zu temporaries made by the kills, %zu left by the last one (%lld MiB); the next "
      "agent removed %zu\n",
      temporaries.size(), dead.size(), static_cast<long long>(allocated >> 20), expected_removed);
}

}  // namespace
}  // namespace ringside::agent::testing
