// Exact accounting under an event storm, against the real kernel: for each
// event type and CPU, the events in `ringside record`'s file + the losses
// its trace_stats reports = the kernel's own count of the tracepoint (a
// per-CPU perf_event_open counter) over the same window. With a BPF ring
// small enough to drop, with a central ring small enough to wrap, and after
// the storm (recovery: a quiet phase loses nothing).
//
// The window. The perf counters count every hit of a tracepoint on a CPU
// between their enable and disable; the BPF programs every hit between
// their attach and detach. Those two windows cannot be made to coincide for
// the whole machine (other processes run at their edges), so both sides
// count only the storm's tasks, by two selectors that pick the same tasks:
//  - ringside: bpf_config.filter_cgroup_id, a cgroup of the test's own that
//    the storm joins before it starts anything (its threads and children
//    inherit it);
//  - perf: a filter on comm (every task of the storm is named the same,
//    unique to the test: storm --comm), on the fields the BPF programs
//    select on (sched_switch: prev or next; fork: the parent; wakeups,
//    migrations, exits: the task).
// And the storm is held still at both edges: it is started and set up
// before the recording (storm --hold: one thread blocked in poll()), the
// counters are enabled only once the programs are attached, the storm does
// everything between "go" and its JSON (threads started and joined, children
// reaped), and the counters are disabled once its one thread is blocked
// again. So no event of the storm's tasks happens outside the counters'
// window while the programs are attached, and the two counts cover the
// same hits.
//
// Where the kernel's count is not exact: switches *out of the idle task*
// (prev_pid 0), of which perf tracepoint counters (and ftrace) see about
// half on this kernel (tests/bpf/event_source_test.cc). sched_switch from
// idle to a storm task would be selected on both sides, so the test keeps
// the idle task from running at all: one SCHED_IDLE spinner per CPU (outside
// the cgroup, another comm) is always runnable. Every other kind, and every
// switch between tasks, is counted exactly.
//
// Wakeups by a timer. A task woken by its timer is woken from a hard
// interrupt, and there this machine's kernel (6.18, a Firecracker guest)
// does not run the BPF programs for a few sched_waking hits (0 to 5 of
// some 1,000 a run, with or without load, mostly while pid 1's own thread
// was the one interrupted), nor perf's counters for some of them, while an
// ftrace instance records every one. Shown with a count kept by the
// program before anything else it does (below ftrace's count of the same
// comm, the difference exactly the events missing from the file), no
// recursion miss reported by the kernel, and the same with the batching of
// sched records off. Neither ringside nor the kernel's counters can count a
// run that never happened, so the storm's tasks are never woken by a timer:
// a ticker process outside the cgroup sleeps for them and wakes them with a
// write, and the storm's end is told by its workers, not by a timeout
// (tests/tools/storm.cc). Before that, the quiet phase below came up 4 or
// 5 wakeups short in about one run of six.
//
// Kernel noise left. With the ticker, beside hackbench, 79 of 81 recordings
// of the quiet-phase test matched exactly; in one perf counted a
// sched_switch fewer than the file holds (+1: a switch, which never runs
// in an interrupt, so a hit perf's counter missed), in one the storm phase
// had 3 sched_migrate_task fewer in the file than perf counted (in 12 other
// recordings with an ftrace instance beside them, the migrations ftrace saw
// and those the BPF program was run for matched exactly). Neither was a
// loss of ringside's: so a recording whose counts differ by at most
// kKernelNoise per kind and CPU is recorded again, up to three times, and
// only the last is held to the exact count. A larger one fails at once.
//
// The split. The file says how many events its programs selected, per kind
// and CPU (ringside_events_seen: every run that made a record, kept or
// dropped). So each row is two comparisons: the file's events + its losses
// against what the programs selected, ringside's own accounting, held exact
// in every recording, never retried; and what they selected against the
// kernel's count, where the noise above lives. In 25 runs of the three BPF
// tests beside hackbench, 3 of the 75 first recordings differed a little,
// each in sched_migrate_task, the programs 1 or 2 short of perf's count
// (in a recording whose BPF rings dropped, and in two whose central ring
// wrapped), and ringside's own accounting was exact in all of them.
//
// Other tracers. The two counts agree only while no other tracer attaches
// to or detaches from tracepoints during the window: beside a loop of
// `ringside record` runs (BPF programs and an ftrace instance coming and
// going every 0.3 s), one run of 20 had 2 switches more in the file than
// perf counted, and a 10-run flake check, with `make test` on the same
// machine, had one sched_migrate_task fewer (64 against 65). Alone, 40 of 40
// runs matched exactly; beside hackbench (CPU load, no tracer), 20 of 20. So
// each recording notes the BPF programs and tracefs instances of the
// machine before the counters start and after they stop, and the id the
// kernel gives a program loaded at each of the two moments (so programs
// loaded and gone again in between count too: a wakeup fewer, with both
// lists equal, in one run beside other tests' recordings); one that saw
// another tracer come or go is recorded again, up to three times; the
// failure message names what came and went, and why each earlier recording
// was made again. Alone, 40 runs of the BPF drop test matched exactly.
//
// The ftrace-only recordings (linux.ftrace, no BPF) select the storm's tasks
// with ftrace event filters, the perf counters' own filters (the same
// filter engine), instead of the cgroup; the ftrace instance's window is its
// tracing_on, set before CMD starts and cleared after it ends, and the
// storm is still at both edges as above. The idle task's switches, which
// ftrace misses as perf does, are kept off by the same spinners. Counted
// exactly per kind and CPU (five runs of each ftrace test matched exactly);
// the kernel's ftrace overrun is per CPU only, so a CPU that overran is
// compared in its sum over the kinds.

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/bpf_ring_fill.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"
#include "tests/testing/perf_tracepoint_counter.h"

namespace ringside::agent {
namespace {

using ::ringside::agent::testing::ReadTraceFile;
using ::ringside::agent::testing::ScratchCgroup;
using ::ringside::agent::testing::TempPath;
using ::ringside::testing::PerfTracepointCounter;
using ::ringside::testing::WaitUntilBpfRingsRead;

int64_t BootNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A child process with pipes to its stdin and from its stdout; killed and
// reaped on destruction if still there.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& stderr_path) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) dup2(err, STDERR_FILENO);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Child() {
    CloseStdin();
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // After Wait(): its CPU time and peak RSS.
  const rusage& usage() const { return usage_; }
  bool Send(const std::string& s) {
    return to_ >= 0 && write(to_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  }
  void CloseStdin() {
    if (to_ >= 0) close(to_);
    to_ = -1;
  }
  // A line of its stdout, waiting up to `timeout_ms`; "" at its end or on
  // timeout.
  std::string ReadLine(int timeout_ms) {
    const int64_t deadline = BootNs() + int64_t{timeout_ms} * 1'000'000;
    for (;;) {
      const size_t nl = buffered_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      const int64_t left_ms = (deadline - BootNs()) / 1'000'000;
      pollfd p{from_, POLLIN, 0};
      if (left_ms <= 0 || poll(&p, 1, static_cast<int>(left_ms)) <= 0) return "";
      char buf[4096];
      const ssize_t n = read(from_, buf, sizeof(buf));
      if (n <= 0) return "";
      buffered_.append(buf, static_cast<size_t>(n));
    }
  }
  // Its exit status (-signal when killed), waiting up to `timeout_ms`;
  // -1000 on timeout.
  int Wait(int timeout_ms) {
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
      int status = 0;
      if (wait4(pid_, &status, WNOHANG, &usage_) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      usleep(10'000);
    }
    return -1000;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffered_;
  rusage usage_{};
};

// One SCHED_IDLE spinner per online CPU, pinned: the idle task never runs
// while they do (see the top of the file). Killed on destruction.
class IdleSpinners {
 public:
  IdleSpinners() {
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
      const pid_t pid = fork();
      if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<int>(cpu), &set);
        sched_setaffinity(0, sizeof(set), &set);
        sched_param param{};
        sched_setscheduler(0, SCHED_IDLE, &param);
        for (;;) {
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~IdleSpinners() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

// The kinds compared: the name in trace_stats, the tracepoint, and the perf
// filter that selects what the BPF programs select, for comm `c`.
struct Kind {
  const char* name;
  const char* tracepoint;
  std::string (*filter)(const std::string& c);
};
const Kind kKinds[] = {
    {"sched_switch", "sched/sched_switch",
     [](const std::string& c) {
       return absl::StrCat("prev_comm == \"", c, "\" || next_comm == \"", c, "\"");
     }},
    {"sched_waking", "sched/sched_waking",
     [](const std::string& c) { return absl::StrCat("comm == \"", c, "\""); }},
    {"sched_wakeup_new", "sched/sched_wakeup_new",
     [](const std::string& c) { return absl::StrCat("comm == \"", c, "\""); }},
    {"sched_migrate_task", "sched/sched_migrate_task",
     [](const std::string& c) { return absl::StrCat("comm == \"", c, "\""); }},
    {"sched_process_fork", "sched/sched_process_fork",
     [](const std::string& c) { return absl::StrCat("parent_comm == \"", c, "\""); }},
    {"sched_process_exit", "sched/sched_process_exit",
     [](const std::string& c) { return absl::StrCat("comm == \"", c, "\""); }},
};

// The kinds compared for an ftrace-only recording: the same selection, as
// the ftrace source's event filters (the kernel's filter syntax, which perf
// uses too). sched_switch and sched_waking are written in compact_sched, as
// BPF writes them, the rest as typed events; sched_migrate_task, which
// ftrace writes in the generic form, is left out.
const Kind kFtraceKinds[] = {
    kKinds[0], kKinds[1], kKinds[2], kKinds[4], kKinds[5],
};

// Per kind, per CPU.
using Counts = std::map<std::string, std::map<uint32_t, int64_t>>;

// The storm's tasks' events of one phase, counted by the kernel.
class KernelCounts {
 public:
  absl::Status Open(absl::Span<const Kind> kinds, const std::string& comm) {
    for (const Kind& k : kinds) {
      if (absl::Status st = counters_[k.name].Open(k.tracepoint, k.filter(comm)); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }
  void Enable() {
    for (auto& [name, c] : counters_) c.Enable();
  }
  void Disable() {
    for (auto& [name, c] : counters_) c.Disable();
  }
  Counts Read() const {
    Counts out;
    for (const auto& [name, c] : counters_) {
      const std::vector<int64_t> per_cpu = c.CountPerCpu();
      for (size_t cpu = 0; cpu < per_cpu.size(); cpu++) {
        out[name][static_cast<uint32_t>(cpu)] = per_cpu[cpu];
      }
    }
    return out;
  }

 private:
  std::map<std::string, PerfTracepointCounter> counters_;
};

const char* KindOf(const trace::FtraceEvent& e) {
  switch (e.event_case()) {
    case trace::FtraceEvent::kSchedWakeup:
      return "sched_wakeup";
    case trace::FtraceEvent::kSchedWaking:
      return "sched_waking";
    case trace::FtraceEvent::kSchedWakeupNew:
      return "sched_wakeup_new";
    case trace::FtraceEvent::kSchedMigrateTask:
      return "sched_migrate_task";
    case trace::FtraceEvent::kSchedProcessFork:
      return "sched_process_fork";
    case trace::FtraceEvent::kSchedProcessExit:
      return "sched_process_exit";
    default:
      return "other";
  }
}

// What a recording's file says: events per kind and CPU (those at or after
// `split_ns` apart, when given), and the losses of its trace_stats.
struct FileAccounting {
  Counts events, events_after_split;
  Counts staging, chunk_pool, buffer;
  // What the BPF programs selected, kept or lost (ringside_events_seen).
  Counts seen;
  uint64_t missed_runs = 0;
  uint64_t chunks_overwritten = 0;
  int64_t switches_into_idle = 0;
};

FileAccounting Account(const trace::Trace& trace, int64_t split_ns) {
  FileAccounting a;
  for (const trace::TracePacket& p : trace.packet()) {
    if (p.has_ftrace_events()) {
      const trace::FtraceEventBundle& b = p.ftrace_events();
      const uint32_t cpu = b.cpu();
      for (const trace::FtraceEvent& e : b.event()) {
        const char* kind = KindOf(e);
        a.events[kind][cpu]++;
        if (split_ns > 0 && static_cast<int64_t>(e.timestamp()) >= split_ns) {
          a.events_after_split[kind][cpu]++;
        }
      }
      const auto& cs = b.compact_sched();
      uint64_t ts = 0;
      for (int i = 0; i < cs.switch_timestamp_size(); i++) {
        ts += cs.switch_timestamp(i);
        a.events["sched_switch"][cpu]++;
        if (split_ns > 0 && static_cast<int64_t>(ts) >= split_ns) {
          a.events_after_split["sched_switch"][cpu]++;
        }
        if (i < cs.switch_next_pid_size() && cs.switch_next_pid(i) == 0) a.switches_into_idle++;
      }
      ts = 0;
      for (int i = 0; i < cs.waking_timestamp_size(); i++) {
        ts += cs.waking_timestamp(i);
        a.events["sched_waking"][cpu]++;
        if (split_ns > 0 && static_cast<int64_t>(ts) >= split_ns) {
          a.events_after_split["sched_waking"][cpu]++;
        }
      }
    }
    if (p.has_trace_stats()) {
      const trace::TraceStats& s = p.trace_stats();
      for (const auto& l : s.ringside_staging_loss()) {
        if (l.kind() == "bpf_missed_runs") {
          a.missed_runs += l.events_lost();
        } else {
          a.staging[l.kind()][l.cpu()] += static_cast<int64_t>(l.events_lost());
        }
      }
      for (const auto& l : s.ringside_event_loss()) {
        (l.stage() == "chunk_pool" ? a.chunk_pool : a.buffer)[l.kind()][l.cpu()] +=
            static_cast<int64_t>(l.events_lost());
      }
      for (const auto& e : s.ringside_events_seen()) {
        a.seen[e.kind()][e.cpu()] += static_cast<int64_t>(e.events());
      }
      for (const auto& b : s.buffer_stats()) a.chunks_overwritten += b.chunks_overwritten();
    }
  }
  return a;
}

int64_t Sum(const Counts& c, const std::string& kind) {
  int64_t n = 0;
  auto it = c.find(kind);
  if (it == c.end()) return 0;
  for (const auto& [cpu, v] : it->second) n += v;
  return n;
}

int64_t At(const Counts& c, const std::string& kind, uint32_t cpu) {
  auto it = c.find(kind);
  if (it == c.end()) return 0;
  auto jt = it->second.find(cpu);
  return jt == it->second.end() ? 0 : jt->second;
}

// Waits until the storm is still: its one thread asleep in poll().
bool WaitUntilStill(pid_t storm) {
#ifdef SYS_poll
  const std::string kPoll = std::to_string(SYS_poll);
#else
  const std::string kPoll = std::to_string(SYS_ppoll);
#endif
  for (int i = 0; i < 500; i++) {
    std::ifstream status(absl::StrCat("/proc/", storm, "/status"));
    std::string line, state, threads;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0) state = line;
      if (line.rfind("Threads:", 0) == 0) threads = line;
    }
    std::ifstream syscall(absl::StrCat("/proc/", storm, "/syscall"));
    std::string nr;
    syscall >> nr;
    // Its wait channel: the kernel names one only once the task is off its
    // run queue, past the schedule() that put it to sleep. (State S alone is
    // set before that call: a task preempted in between, on a busy CPU,
    // switched out after the counters had stopped.)
    std::ifstream wchan_file(absl::StrCat("/proc/", storm, "/wchan"));
    std::string wchan;
    wchan_file >> wchan;
    if (state.find("(sleeping)") != std::string::npos && threads == "Threads:\t1" &&
        (nr == kPoll || nr == std::to_string(SYS_ppoll)) && !wchan.empty() && wchan != "0") {
      return true;
    }
    usleep(10'000);
  }
  return false;
}

struct StormSetup {
  uint32_t ring_size_kb = 4096;
  uint32_t drain_period_ms = 100;
  uint32_t buffer_kb = 65536;
  double storm_s = 4;
  int pairs = 2;
  int forkers = 2;
  bool quiet_phase = false;           // Then a quiet load after the storm.
  uint32_t consumer_cpu_percent = 0;  // max_consumer_cpu_percent; 0: none.
  // Then an ftrace-only recording (kFtraceKinds), with kernel buffers of
  // this size per CPU, instead of BPF.
  bool ftrace = false;
  uint32_t ftrace_buffer_kb = 65536;
  absl::Span<const Kind> kinds() const {
    return ftrace ? absl::Span<const Kind>(kFtraceKinds) : absl::Span<const Kind>(kKinds);
  }
};

// The tracers of the machine at one moment: its BPF programs (by id) and
// its tracefs instances; and the id the kernel gives the next program
// loaded, which tells programs loaded and unloaded between two moments
// apart from none (a short `ringside record` beside the test, whose
// programs are gone again by the second look: one such run had a wakeup
// fewer in the file than perf counted, with the two lists of ids equal).
struct Tracers {
  std::set<uint32_t> bpf_programs;
  std::set<std::string> instances;
  uint32_t probe_id = 0;  // 0: no program could be loaded.
};

// Loads a program that does nothing (a socket filter: `return 0`), and
// returns the id the kernel gave it; 0 if it cannot. Program ids are
// handed out in increasing order (the kernel's idr, cyclic only past
// INT_MAX).
uint32_t ProbeProgramId() {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
  insns[1].code = BPF_JMP | BPF_EXIT;
  const int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "rs_tracer_probe", "GPL", insns,
                               sizeof(insns) / sizeof(insns[0]), nullptr);
  if (fd < 0) return 0;
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  const uint32_t id = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
  close(fd);
  return id;
}

Tracers TracersNow() {
  Tracers t;
  t.probe_id = ProbeProgramId();
  for (uint32_t id = 0; bpf_prog_get_next_id(id, &id) == 0;) t.bpf_programs.insert(id);
  const auto& tracefs = ringside::ftrace::testing::KernelTracefs();
  if (tracefs.ok()) {
    if (DIR* d = opendir((tracefs->root() + "/instances").c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') t.instances.insert(e->d_name);
      }
      closedir(d);
    }
  }
  return t;
}

// What came or went between `before` and `after` ("3 BPF programs loaded
// (ids 7, 8, 9), 1 tracefs instance removed (x)"): "" when nothing did.
std::string TracersChanged(Tracers before, Tracers after) {
  // The probes themselves, freed after an RCU grace period, may still be
  // listed.
  for (uint32_t probe : {before.probe_id, after.probe_id}) {
    before.bpf_programs.erase(probe);
    after.bpf_programs.erase(probe);
  }
  std::vector<std::string> changes;
  auto diff = [&](const auto& from, const auto& to, const char* what, const char* how) {
    std::vector<std::string> names;
    for (const auto& x : to) {
      if (from.count(x) == 0) names.push_back(absl::StrCat(x));
    }
    if (names.empty()) return;
    const size_t n = names.size();
    if (n > 3) {
      names.resize(3);
      names.push_back("...");
    }
    changes.push_back(absl::StrCat(n, " ", what, " ", how, " (", absl::StrJoin(names, ", "), ")"));
  };
  diff(before.bpf_programs, after.bpf_programs, "BPF programs", "loaded");
  diff(after.bpf_programs, before.bpf_programs, "BPF programs", "unloaded");
  diff(before.instances, after.instances, "tracefs instances", "made");
  diff(after.instances, before.instances, "tracefs instances", "removed");
  if (before.probe_id != 0 && after.probe_id > before.probe_id + 1) {
    // Every id between the two probes went to a program some other
    // process loaded in the window; those still loaded are named above.
    size_t gone = 0;
    for (uint32_t id = before.probe_id + 1; id < after.probe_id; id++) {
      gone += after.bpf_programs.count(id) == 0;
    }
    if (gone > 0) {
      changes.push_back(absl::StrCat(gone, " BPF programs loaded and unloaded (ids between ",
                                     before.probe_id, " and ", after.probe_id, ")"));
    }
  }
  return absl::StrJoin(changes, ", ");
}

struct Result {
  // Other tracers that came or went while the counters counted; "" if none.
  std::string other_tracers;
  // Why the recordings before this one were made again ("" if none were).
  std::string earlier_recordings;
  FileAccounting file;
  Counts kernel;        // Over the whole recording (both phases).
  Counts kernel_quiet;  // Over the quiet phase only.
  std::string storm_json;
  std::string quiet_json;
  double storm_s = 0;       // Between the counters' enable and disable.
  double record_cpu_s = 0;  // ringside record's user + system time.
  long record_max_rss_kb = 0;
};

// Records the storm (and the quiet phase) with `setup`, counting the
// storm's tasks' events with perf on the side.
void RecordStorm(const StormSetup& setup, Result* result) {
  const std::string storm_bin = ringside::testing::BuildDir() + "/storm";
  ASSERT_EQ(access(storm_bin.c_str(), X_OK), 0) << storm_bin << " missing: make build/storm";
  ScratchCgroup cgroup("storm");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  const std::string comm = absl::StrCat("rsst", getpid() % 1000000);
  const std::string quiet_comm = absl::StrCat("rsqt", getpid() % 1000000);
  KernelCounts storm_counts, quiet_counts;
  if (absl::Status st = storm_counts.Open(setup.kinds(), comm); !st.ok()) {
    GTEST_SKIP() << "needs perf: " << st;
  }
  ASSERT_TRUE(quiet_counts.Open(setup.kinds(), quiet_comm).ok());

  const std::string config = TempPath("storm.pbtxt");
  const std::string out = TempPath("storm.pftrace");
  std::string source;
  if (setup.ftrace) {
    // The storm's tasks only, by comm: the perf counters' own filters.
    std::string events, filters;
    for (const Kind& k : setup.kinds()) {
      absl::StrAppend(&events, "  ftrace_events: \"", k.tracepoint, "\"\n");
      std::string filter = k.filter(comm);
      if (setup.quiet_phase) filter = absl::StrCat("(", filter, ") || ", k.filter(quiet_comm));
      absl::StrAppend(&filters, "  event_filters { event: \"", k.tracepoint, "\" filter: '", filter,
                      "' }\n");
    }
    source = absl::StrCat("data_sources { config { name: \"linux.ftrace\" target_buffer: 0 ",
                          "ftrace_config {\n", events, filters,
                          "  buffer_size_kb: ", setup.ftrace_buffer_kb,
                          " drain_period_ms: ", setup.drain_period_ms, "\n} } }\n");
  } else {
    source = absl::StrCat(
        "data_sources { config { name: \"linux.bpf\" target_buffer: 0 bpf_config {\n",
        "  ring_size_kb: ", setup.ring_size_kb, " drain_period_ms: ", setup.drain_period_ms, "\n",
        "  filter_cgroup_id: ", cgroup.id(), "\n} } }\n");
  }
  std::ofstream(config) << absl::StrCat(
      "buffers { size_kb: ", setup.buffer_kb, " fill_policy: RING_BUFFER }\n", source,
      "max_consumer_cpu_percent: ", setup.consumer_cpu_percent, "\n");

  IdleSpinners spinners;
  // Both loads are set up and still before the programs attach.
  Child storm({storm_bin, "--hold", "--comm", comm, "--cgroup", cgroup.dir(), "--duration",
               absl::StrCat(setup.storm_s), "--pairs", absl::StrCat(setup.pairs), "--forkers",
               absl::StrCat(setup.forkers)},
              TempPath("storm.err"));
  ASSERT_EQ(storm.ReadLine(10'000), "ready");
  ASSERT_TRUE(WaitUntilStill(storm.pid()));
  // The quiet phase: in the same cgroup, another comm (its own counters).
  std::unique_ptr<Child> quiet;
  if (setup.quiet_phase) {
    quiet = std::make_unique<Child>(
        std::vector<std::string>{storm_bin, "--hold", "--comm", quiet_comm, "--cgroup",
                                 cgroup.dir(), "--duration", "3", "--pairs", "1", "--forkers", "1",
                                 "--pause-us", "10000"},
        TempPath("quiet.err"));
    ASSERT_EQ(quiet->ReadLine(10'000), "ready");
    ASSERT_TRUE(WaitUntilStill(quiet->pid()));
  }
  // CMD runs once the programs are attached; it ends when its stdin does.
  Child record({ringside::testing::RingsideBinary(), "record", "-c", config, "-o", out, "--",
                "/bin/sh", "-c", "echo attached; exec cat >/dev/null"},
               TempPath("record.err"));
  ASSERT_EQ(record.ReadLine(30'000), "attached");

  const Tracers tracers_before = TracersNow();
  storm_counts.Enable();
  const int64_t enabled_ns = BootNs();
  ASSERT_TRUE(storm.Send("go\n"));
  result->storm_json = storm.ReadLine(static_cast<int>(setup.storm_s * 1000) + 20'000);
  ASSERT_FALSE(result->storm_json.empty());
  ASSERT_TRUE(WaitUntilStill(storm.pid()));
  storm_counts.Disable();
  result->storm_s = static_cast<double>(BootNs() - enabled_ns) / 1e9;

  int64_t split_ns = 0;
  if (quiet != nullptr) {
    // Both loads still until the reader has read the rings to their end:
    // the quiet phase then starts on empty rings that hold it whole. (A
    // fixed second was not enough: under ASan the reader, held to 1% of a
    // CPU, still had most of the storm's backlog in the rings, and the
    // quiet phase lost a fifth of its events to the full rings, counted as
    // the rings' losses.)
    const int64_t still_ns = BootNs();
    const absl::Status read = WaitUntilBpfRingsRead(record.pid(), absl::Seconds(120));
    ASSERT_TRUE(read.ok()) << read;
    std::printf("the reader read the rings to their end %.2f s after the storm\n",
                static_cast<double>(BootNs() - still_ns) / 1e9);
    split_ns = BootNs();
    quiet_counts.Enable();
    ASSERT_TRUE(quiet->Send("go\n"));
    result->quiet_json = quiet->ReadLine(30'000);
    ASSERT_FALSE(result->quiet_json.empty());
    ASSERT_TRUE(WaitUntilStill(quiet->pid()));
    quiet_counts.Disable();
  }
  result->other_tracers = TracersChanged(tracers_before, TracersNow());
  record.CloseStdin();
  ASSERT_EQ(record.Wait(60'000), 0);
  const rusage& ru = record.usage();
  result->record_cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  result->record_max_rss_kb = ru.ru_maxrss;
  // The loads exit once the recording has stopped, outside the window.
  storm.CloseStdin();
  EXPECT_EQ(storm.Wait(10'000), 0);
  if (quiet != nullptr) {
    quiet->CloseStdin();
    EXPECT_EQ(quiet->Wait(10'000), 0);
  }

  result->file = Account(ReadTraceFile(out), split_ns);
  result->kernel = storm_counts.Read();
  if (setup.quiet_phase) {
    result->kernel_quiet = quiet_counts.Read();
    for (auto& [kind, per_cpu] : result->kernel_quiet) {
      for (auto& [cpu, n] : per_cpu) result->kernel[kind][cpu] += n;
    }
  }
  std::remove(out.c_str());
  std::remove(config.c_str());
}

// Ringside's own difference for a kind on a CPU: the events in the file and
// those counted lost at every stage, against the events its programs
// selected. Exact in every recording, whatever the kernel's counters do.
int64_t OwnDifference(const FileAccounting& f, const std::string& kind, uint32_t cpu) {
  return At(f.events, kind, cpu) + At(f.staging, kind, cpu) + At(f.chunk_pool, kind, cpu) +
         At(f.buffer, kind, cpu) - At(f.seen, kind, cpu);
}

// RecordStorm, again (up to three recordings in all) while another tracer
// came or went during the counters' window (see the top of the file).
// The kinds and CPUs of a BPF recording whose programs selected a few more
// or fewer events than the kernel counted (over the whole recording; over
// the quiet phase, the file's events, which are all there is to split it
// by), by kKernelNoise or less, while ringside's own accounting is exact
// (OwnDifference): "sched_switch on CPU 1: +1"; "" when all match, or when
// one differs by more, or ringside's own by any (a real difference, for the
// test to report).
constexpr int64_t kKernelNoise = 3;
std::string SmallDisagreements(const StormSetup& setup, const Result& r) {
  if (setup.ftrace) return "";  // Compared per CPU where the kernel overran.
  std::vector<std::string> found;
  auto check = [&](const char* kind, uint32_t cpu, int64_t diff, const char* phase) {
    if (diff == 0) return true;
    found.push_back(absl::StrCat(kind, " on CPU ", cpu, phase, ": ", diff > 0 ? "+" : "", diff));
    return std::abs(diff) <= kKernelNoise;
  };
  for (const Kind& k : kKinds) {
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
      const uint32_t c = static_cast<uint32_t>(cpu);
      const FileAccounting& f = r.file;
      // What the programs selected against the kernel's count: its noise.
      // Ringside's own difference is never noise (a real one to report).
      if (OwnDifference(f, k.name, c) != 0) return "";
      const int64_t diff = At(f.seen, k.name, c) - At(r.kernel, k.name, c);
      if (!check(k.name, c, diff, "")) return "";
      if (setup.quiet_phase) {
        const int64_t quiet = At(f.events_after_split, k.name, c) - At(r.kernel_quiet, k.name, c);
        if (!check(k.name, c, quiet, " in the quiet phase")) return "";
      }
    }
  }
  return absl::StrJoin(found, ", ");
}

// RecordStorm, again (up to three recordings in all) while another tracer
// came or went during the counters' window, or while the kernel's counts
// and the file's differ by a few events (see the top of the file): a
// difference of ringside's own comes back in every recording.
void RecordStormRetryingNoise(const StormSetup& setup, Result* result) {
  std::string earlier;
  for (int attempt = 1;; attempt++) {
    *result = Result();
    RecordStorm(setup, result);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    const std::string small = SmallDisagreements(setup, *result);
    if ((result->other_tracers.empty() && small.empty()) || attempt == 3) {
      result->earlier_recordings = earlier;
      return;
    }
    const std::string why =
        !result->other_tracers.empty()
            ? absl::StrCat("other tracers came or went in the window (", result->other_tracers, ")")
            : absl::StrCat("the kernel's counts and those its programs selected differ by a few (",
                           small, "), ringside's own accounting exact");
    std::printf("recording %d: %s; again\n", attempt, why.c_str());
    absl::StrAppend(&earlier, "\nrecording ", attempt, ": ", why);
  }
}

std::string RecordingsNote(const Result& r) {
  std::string note = r.earlier_recordings;
  if (!r.other_tracers.empty()) {
    absl::StrAppend(
        &note, "\n(other tracers came or went in this recording's window: ", r.other_tracers, ")");
  }
  return note;
}

// For every kind and CPU: file + staging + chunk pool + buffer = what the
// programs selected (ringside's own accounting, "own"), and that = the
// kernel's count ("kernel": a run the kernel did not make, or its counter's
// noise). Prints the table; returns the totals lost (staging, buffer).
std::pair<int64_t, int64_t> ExpectExactAccounting(const Result& r) {
  const FileAccounting& f = r.file;
  int64_t staging_total = 0, buffer_total = 0;
  std::printf("storm: %s\n", r.storm_json.c_str());
  std::printf("%-20s %4s %10s %10s %10s %10s %10s %10s %6s %6s\n", "kind", "cpu", "kernel",
              "selected", "file", "bpf_ring", "chunk_pool", "buffer", "own", "kernel");
  for (const Kind& k : kKinds) {
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
      const uint32_t c = static_cast<uint32_t>(cpu);
      const int64_t kernel = At(r.kernel, k.name, c), seen = At(f.seen, k.name, c),
                    file = At(f.events, k.name, c), staging = At(f.staging, k.name, c),
                    pool = At(f.chunk_pool, k.name, c), buffer = At(f.buffer, k.name, c);
      const int64_t own = OwnDifference(f, k.name, c), kernel_diff = seen - kernel;
      std::printf("%-20s %4u %10lld %10lld %10lld %10lld %10lld %10lld %6lld %6lld\n", k.name, c,
                  static_cast<long long>(kernel), static_cast<long long>(seen),
                  static_cast<long long>(file), static_cast<long long>(staging),
                  static_cast<long long>(pool), static_cast<long long>(buffer),
                  static_cast<long long>(own), static_cast<long long>(kernel_diff));
      EXPECT_EQ(own, 0) << k.name << " on CPU " << c << ": file " << file << " + bpf ring "
                        << staging << " + chunk pool " << pool << " + buffer " << buffer
                        << " != selected by the programs " << seen << RecordingsNote(r);
      EXPECT_EQ(kernel_diff, 0) << k.name << " on CPU " << c << ": selected by the programs "
                                << seen << " != kernel " << kernel << RecordingsNote(r);
      staging_total += staging;
      buffer_total += buffer;
    }
  }
  // Records given up unread are of no one kind: the table cannot place
  // them, and any would show there as a shortfall of some row.
  for (const char* unread : {"ring_corruptions", "malformed_records"}) {
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
      EXPECT_EQ(At(f.staging, unread, static_cast<uint32_t>(cpu)), 0)
          << unread << " (records given up unread, of no one kind) on CPU " << cpu;
    }
  }
  std::printf("program runs the kernel skipped (bpf_missed_runs): %llu\n",
              static_cast<unsigned long long>(f.missed_runs));
  EXPECT_EQ(f.missed_runs, 0u) << "program runs the kernel skipped are not per CPU and kind";
  // The idle task never ran after a storm task (the spinners kept it off).
  EXPECT_EQ(f.switches_into_idle, 0);
  // The storm made the counts worth comparing.
  EXPECT_GT(Sum(r.kernel, "sched_switch"), 10'000);
  EXPECT_GT(Sum(r.kernel, "sched_process_fork"), 100);
  EXPECT_GT(Sum(r.kernel, "sched_process_exit"), 100);
  return {staging_total, buffer_total};
}

// The same for an ftrace-only recording. The ftrace source's staging loss
// is the kernel's overrun of a CPU's ftrace buffer, counted in events per
// CPU but not per kind ("ftrace_overrun"): on a CPU with no overrun, file +
// chunk pool + buffer = kernel for each kind; on one with overruns, only
// their sums over the kinds, + the overrun, can be compared. Prints the
// table; returns the totals lost (overrun, buffer) and, in *exact_cpus, the
// CPUs compared per kind.
std::pair<int64_t, int64_t> ExpectExactFtraceAccounting(const Result& r, int* exact_cpus) {
  const FileAccounting& f = r.file;
  int64_t overrun_total = 0, buffer_total = 0;
  *exact_cpus = 0;
  std::printf("storm: %s\n", r.storm_json.c_str());
  std::printf("%-20s %4s %10s %10s %10s %10s %10s %6s\n", "kind", "cpu", "kernel", "file",
              "overrun", "chunk_pool", "buffer", "diff");
  for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
    const uint32_t c = static_cast<uint32_t>(cpu);
    const int64_t overrun = At(f.staging, "ftrace_overrun", c);
    int64_t kernel_sum = 0, kept_and_lost_sum = 0;
    for (const Kind& k : kFtraceKinds) {
      const int64_t kernel = At(r.kernel, k.name, c), file = At(f.events, k.name, c),
                    pool = At(f.chunk_pool, k.name, c), buffer = At(f.buffer, k.name, c);
      const int64_t diff = file + pool + buffer - kernel;
      std::printf("%-20s %4u %10lld %10lld %10s %10lld %10lld %6lld\n", k.name, c,
                  static_cast<long long>(kernel), static_cast<long long>(file), "",
                  static_cast<long long>(pool), static_cast<long long>(buffer),
                  static_cast<long long>(diff));
      if (overrun == 0) {
        EXPECT_EQ(diff, 0) << k.name << " on CPU " << c << ": file " << file << " + chunk pool "
                           << pool << " + buffer " << buffer << " != kernel " << kernel
                           << RecordingsNote(r);
      }
      kernel_sum += kernel;
      kept_and_lost_sum += file + pool + buffer;
      buffer_total += buffer;
    }
    std::printf("%-20s %4u %10lld %10lld %10lld %10s %10s %6lld\n", "(all)", c,
                static_cast<long long>(kernel_sum), static_cast<long long>(kept_and_lost_sum),
                static_cast<long long>(overrun), "", "",
                static_cast<long long>(kept_and_lost_sum + overrun - kernel_sum));
    EXPECT_EQ(kept_and_lost_sum + overrun, kernel_sum)
        << "CPU " << c << ": file and losses " << kept_and_lost_sum << " + ftrace overrun "
        << overrun << " != kernel " << kernel_sum << RecordingsNote(r);
    if (overrun == 0) ++*exact_cpus;
    overrun_total += overrun;
  }
  EXPECT_EQ(f.switches_into_idle, 0);
  EXPECT_GT(Sum(r.kernel, "sched_switch"), 10'000);
  EXPECT_GT(Sum(r.kernel, "sched_waking"), 10'000);
  EXPECT_GT(Sum(r.kernel, "sched_process_fork"), 100);
  EXPECT_GT(Sum(r.kernel, "sched_process_exit"), 100);
  return {overrun_total, buffer_total};
}

TEST(StormAccountingTest, BpfRingDropsAreCountedExactlyPerCpuAndType) {
  RINGSIDE_REQUIRE_TRACEFS();
  StormSetup s;
  s.ring_size_kb = 4;  // About 50 records; drained every second, or when a quarter full.
  s.drain_period_ms = 1000;
  Result r;
  RecordStormRetryingNoise(s, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  const auto [staging, buffer] = ExpectExactAccounting(r);
  EXPECT_GT(staging, 1000) << "the BPF rings were meant to drop";
  EXPECT_EQ(buffer, 0);
}

TEST(StormAccountingTest, OverwrittenEventsOfAWrappedRingAreCountedExactly) {
  RINGSIDE_REQUIRE_TRACEFS();
  StormSetup s;
  s.buffer_kb = 512;  // Wraps many times over in the storm.
  Result r;
  RecordStormRetryingNoise(s, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  const auto [staging, buffer] = ExpectExactAccounting(r);
  EXPECT_GT(r.file.chunks_overwritten, 100u);
  EXPECT_GT(buffer, 10'000) << "the central ring was meant to wrap";
}

// An ftrace-only recording (sched events via the ftrace source, no BPF)
// whose central ring wraps many times over: the events the ftrace source
// wrote and the ring overwrote are counted per CPU and kind.
TEST(StormAccountingTest, FtraceEventsOverwrittenInAWrappedRingAreCountedExactly) {
  RINGSIDE_REQUIRE_TRACEFS();
  StormSetup s;
  s.ftrace = true;
  s.buffer_kb = 512;  // Wraps many times over in the storm.
  // Kernel buffers the reader does not fall behind (their overrun is not
  // per kind: see above).
  s.ftrace_buffer_kb = 65536;
  Result r;
  RecordStormRetryingNoise(s, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  int exact_cpus = 0;
  const auto [overrun, buffer] = ExpectExactFtraceAccounting(r, &exact_cpus);
  std::printf("ftrace overrun: %lld; CPUs compared per kind: %d\n", static_cast<long long>(overrun),
              exact_cpus);
  EXPECT_GT(exact_cpus, 0) << "every CPU's ftrace buffer overran: nothing compared per kind";
  EXPECT_GT(r.file.chunks_overwritten, 100u);
  EXPECT_GT(buffer, 10'000) << "the central ring was meant to wrap";
}

// The same with kernel buffers too small for the storm: the events the
// kernel overwrote before the reader came, counted per CPU only, make up
// the rest of each CPU's count.
TEST(StormAccountingTest, FtraceOverrunsAreCountedExactlyPerCpu) {
  RINGSIDE_REQUIRE_TRACEFS();
  StormSetup s;
  s.ftrace = true;
  s.ftrace_buffer_kb = 64;
  s.drain_period_ms = 1000;
  // The reader held to 1% of a CPU, so that the kernel overwrites on an
  // idle machine too, where the reader would otherwise keep up.
  s.consumer_cpu_percent = 1;
  Result r;
  RecordStormRetryingNoise(s, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  int exact_cpus = 0;
  const auto [overrun, buffer] = ExpectExactFtraceAccounting(r, &exact_cpus);
  EXPECT_GT(overrun, 1000) << "the ftrace buffers were meant to overrun";
}

// Recovery: after a storm that made the BPF rings drop, a quiet load in
// the same recording is recorded whole: every event the kernel counted in
// that phase is in the file (so none of it was lost, and no ring or source
// was left stuck).
TEST(StormAccountingTest, AfterAStormThatDroppedAQuietPhaseLosesNothing) {
  RINGSIDE_REQUIRE_TRACEFS();
  StormSetup s;
  // About 7,000 records per CPU, the reader woken at a quarter, and held to
  // 1% of a CPU (about 70,000 events a second): the storm overflows the
  // rings within tens of milliseconds whatever the machine's load; the
  // quiet phase's 3,000-odd events fit whole even if the reader read none
  // of them. (With 16 KiB rings, 220 records, a reader paused by its budget
  // or kept off the CPU by a loaded machine dropped some of the quiet
  // phase's events, counted as the ring's losses but missing from the file.)
  s.ring_size_kb = 512;
  s.drain_period_ms = 100;
  s.consumer_cpu_percent = 1;
  s.quiet_phase = true;
  // The reader's budget is CPU time, the storm's pace the machine's: on a
  // machine loaded enough to slow the storm below what 1% of a CPU reads
  // (1 run in 20 beside two builds and other storms), the rings never fill
  // and nothing would be shown. Such a recording is made again, up to
  // three in all.
  Result r;
  for (int attempt = 1;; attempt++) {
    RecordStormRetryingNoise(s, &r);
    if (IsSkipped() || HasFatalFailure()) return;
    int64_t dropped = 0;
    for (const Kind& k : kKinds) dropped += Sum(r.file.staging, k.name);
    if (dropped > 100 || attempt == 3) break;
    std::printf(
        "recording %d: the storm made the rings drop only %lld events (a loaded "
        "machine slowed it); again\n",
        attempt, static_cast<long long>(dropped));
  }
  const auto [staging, buffer] = ExpectExactAccounting(r);
  EXPECT_GT(staging, 100) << "the storm was meant to make the BPF rings drop";
  std::printf("quiet: %s\n", r.quiet_json.c_str());
  // Every event of the quiet phase is in the file: none lost.
  for (const Kind& k : kKinds) {
    for (const auto& [cpu, kernel] : r.kernel_quiet[k.name]) {
      const int64_t file = At(r.file.events_after_split, k.name, cpu);
      EXPECT_EQ(file, kernel) << k.name << " on CPU " << cpu << " in the quiet phase"
                              << RecordingsNote(r);
    }
  }
  // A quiet load of some hundreds of forks and a thousand switches on an
  // idle machine; under ASan beside hackbench -g 4, 66 forks and some 500
  // switches. Enough that a stuck source would show either way.
  EXPECT_GT(Sum(r.kernel_quiet, "sched_process_fork"), 20);
  EXPECT_GT(Sum(r.kernel_quiet, "sched_switch"), 200);
}

// The figures (tests/bench/storm_accounting.sh, `make storm`): a longer
// storm (STORM_SECONDS, 30) against ringside record with the shipped
// defaults (STORM_RING_KB, STORM_BUFFER_KB to change them), the exact
// accounting above, and ringside's cost. Not part of `make test`.
TEST(StormAccountingTest, DISABLED_Figures) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto env = [](const char* name, double fallback) {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? std::atof(v) : fallback;
  };
  StormSetup s;
  s.storm_s = env("STORM_SECONDS", 30);
  s.ring_size_kb = static_cast<uint32_t>(env("STORM_RING_KB", 4096));
  s.buffer_kb = static_cast<uint32_t>(env("STORM_BUFFER_KB", 65536));
  s.pairs = static_cast<int>(env("STORM_PAIRS", 2));
  s.forkers = static_cast<int>(env("STORM_FORKERS", 2));
  Result r;
  RecordStormRetryingNoise(s, &r);
  if (IsSkipped() || HasFatalFailure()) return;
  ExpectExactAccounting(r);
  int64_t kernel = 0, file = 0, staging = 0, pool = 0, buffer = 0;
  for (const Kind& k : kKinds) {
    kernel += Sum(r.kernel, k.name);
    file += Sum(r.file.events, k.name);
    staging += Sum(r.file.staging, k.name);
    pool += Sum(r.file.chunk_pool, k.name);
    buffer += Sum(r.file.buffer, k.name);
  }
  std::printf(
      "\nconfig: bpf ring %u KiB per CPU, drain %u ms, central RING_BUFFER %u KiB, %d pairs, "
      "%d forkers, %ld CPUs\n",
      s.ring_size_kb, s.drain_period_ms, s.buffer_kb, s.pairs, s.forkers,
      sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("storm rate:        %.0f events/s (kernel count %lld in %.1f s)\n",
              static_cast<double>(kernel) / r.storm_s, static_cast<long long>(kernel), r.storm_s);
  std::printf("ringside record:   %.2f CPU s (%.1f%% of one CPU), peak RSS %.1f MiB\n",
              r.record_cpu_s, 100 * r.record_cpu_s / r.storm_s,
              static_cast<double>(r.record_max_rss_kb) / 1024);
  std::printf("events kept:       %lld\n", static_cast<long long>(file));
  std::printf("lost, BPF ring:    %lld\n", static_cast<long long>(staging));
  std::printf("lost, chunk pool:  %lld\n", static_cast<long long>(pool));
  std::printf("lost, buffer wrap: %lld (%llu chunks overwritten)\n", static_cast<long long>(buffer),
              static_cast<unsigned long long>(r.file.chunks_overwritten));
  std::printf("kept + lost - kernel count: %lld\n",
              static_cast<long long>(file + staging + pool + buffer - kernel));
}

}  // namespace
}  // namespace ringside::agent
