// Every kind of file `ringside record` writes, loaded into Perfetto's trace
// processor (the importer ui.perfetto.dev runs): it must import with no
// error or warning, report as data loss what our trace_stats report, and
// show the scheduling and the processes as they were.

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/config/config_loader.h"
#include "agent/output/compressing_sink.h"
#include "agent/output/rotating_trace_file.h"
#include "agent/session/tracing_session.h"
#include "agent/tracefile/packet_compression.h"
#include "agent/tracefile/trace_sink.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"
#include "tests/testing/perf_tracepoint_counter.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

using testing::Query;
using testing::QueryInt;
using testing::TempPath;

// A process of the test's own, started while ringside records: it names
// itself, starts two named threads, forks a child that names itself and
// execs /bin/true, and exits after both.
struct Workload {
  pid_t parent = -1;
  pid_t child = -1;
  std::vector<pid_t> threads;
};

void* SleepingThread(void* tid_out) {
  prctl(PR_SET_NAME, "rs-tp-thread", 0, 0, 0);
  *static_cast<pid_t*>(tid_out) = gettid();
  for (int i = 0; i < 20; i++) usleep(500);
  return nullptr;
}

// The workload forked and waiting for `Go()`: a test that records in its
// own process forks it before the session's threads exist (a child forked
// from a threaded process may deadlock in the allocator, as under ASan).
struct PendingWorkload {
  pid_t parent = -1;
  int go = -1;      // Write end: one byte starts it.
  int report = -1;  // Read end: the child's pids.
};

PendingWorkload ForkForkExecExitWorkload() {
  int report[2], go[2];
  PendingWorkload p;
  if (pipe(report) != 0) return p;
  if (pipe(go) != 0) return p;
  p.parent = fork();
  if (p.parent == 0) {
    close(report[0]);
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(1);
    prctl(PR_SET_NAME, "rs-tp-parent", 0, 0, 0);
    pthread_t threads[2];
    pid_t tids[2] = {0, 0};
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], nullptr, SleepingThread, &tids[i]);
    const pid_t child = fork();
    if (child == 0) {
      prctl(PR_SET_NAME, "rs-tp-child", 0, 0, 0);
      execl("/bin/true", "/bin/true", static_cast<char*>(nullptr));
      _exit(127);
    }
    waitpid(child, nullptr, 0);
    for (pthread_t t : threads) pthread_join(t, nullptr);
    const pid_t out[3] = {child, tids[0], tids[1]};
    _exit(write(report[1], out, sizeof(out)) == sizeof(out) ? 0 : 1);
  }
  close(report[1]);
  close(go[0]);
  p.go = go[1];
  p.report = report[0];
  return p;
}

// Starts the forked workload and waits for it to end.
Workload RunPendingWorkload(PendingWorkload p) {
  Workload w;
  w.parent = p.parent;
  if (p.parent < 0) return w;
  if (write(p.go, "g", 1) != 1) ADD_FAILURE() << "workload did not start";
  close(p.go);
  pid_t in[3] = {-1, -1, -1};
  if (read(p.report, in, sizeof(in)) != sizeof(in)) ADD_FAILURE() << "workload did not report";
  close(p.report);
  waitpid(w.parent, nullptr, 0);
  w.child = in[0];
  w.threads = {in[1], in[2]};
  return w;
}

Workload RunForkExecExitWorkload() { return RunPendingWorkload(ForkForkExecExitWorkload()); }

// A recorded file, removed when the test is done with it.
struct Recording {
  Recording() = default;
  Recording(Recording&& other) noexcept
      : path(std::exchange(other.path, std::string())),
        workload(other.workload),
        freed(other.freed),
        freed_comm(std::move(other.freed_comm)) {}
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording() {
    if (!path.empty()) unlink(path.c_str());
  }

  std::string path;
  Workload workload;
  // A task reaped before the hold (its free falls within the recording),
  // and its name.
  pid_t freed = -1;
  std::string freed_comm;
};

// Records with `config` (protobuf text; empty: the embedded default) while the workload runs, for
// at least `hold_ms`: the command ringside runs blocks on a FIFO, so the recording is running once
// the FIFO has a reader, and ends when we release it.
Recording Record(const std::string& name, const std::string& config, int hold_ms) {
  Recording r;
  const std::string cfg = TempPath(name + ".pbtxt");
  const std::string fifo = TempPath(name + ".fifo");
  r.path = TempPath(name + ".pftrace");
  std::ofstream(cfg) << config;
  unlink(fifo.c_str());
  if (mkfifo(fifo.c_str(), 0600) != 0) {
    ADD_FAILURE() << "mkfifo " << fifo;
    return r;
  }
  std::vector<std::string> args = {"record", "-o", r.path};
  if (!config.empty()) args.insert(args.end(), {"-c", cfg});
  args.insert(args.end(), {"--", "/bin/sh", "-c", absl::StrCat("read x < ", fifo)});
  pid_t ringside = -1;
  testing::RunRingside(args, &ringside, /*wait=*/false);
  // Up to 60 s: under make flake-check's load, loading and attaching the
  // programs once took longer than the 10 s this waited before.
  int fd = -1;
  for (int i = 0; i < 12000 && fd < 0; i++) {
    fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && waitpid(ringside, nullptr, WNOHANG) != 0) break;
    if (fd < 0) usleep(5000);
  }
  if (fd < 0) {
    ADD_FAILURE() << "ringside record did not start its command within 60 s; its threads:"
                  << testing::ThreadsOf(ringside);
    kill(ringside, SIGTERM);
  } else {
    // A task that exits and is reaped at once, before the hold. The kernel
    // frees it a grace period after the reap (milliseconds here, but
    // without bound): the kernel's own count of its free is waited for, so
    // that the free falls within the recording.
    r.freed_comm = absl::StrCat("rsfree", getpid());
    ringside::testing::PerfTracepointCounter frees;
    const bool counting =
        frees.Open("sched/sched_process_free", absl::StrCat("comm == \"", r.freed_comm, "\"")).ok();
    if (counting) frees.Enable();
    r.freed = fork();
    if (r.freed == 0) {
      prctl(PR_SET_NAME, r.freed_comm.c_str(), 0, 0, 0);
      _exit(0);
    }
    if (r.freed > 0) waitpid(r.freed, nullptr, 0);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (counting && frees.Count() == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    // The workload last: a wrapped ring keeps the newest events.
    usleep(static_cast<useconds_t>(hold_ms) * 1000);
    r.workload = RunForkExecExitWorkload();
    EXPECT_EQ(write(fd, "x\n", 2), 2);
    close(fd);
  }
  // Bounded, so that a recording that does not end fails the test instead
  // of hanging `make test`.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 1200 && reaped == 0; i++) {
    reaped = waitpid(ringside, &status, WNOHANG);
    if (reaped == 0) usleep(50'000);
  }
  if (reaped == 0) {
    ADD_FAILURE() << "ringside record did not end within 60 s of its command; killed";
    kill(ringside, SIGKILL);
    waitpid(ringside, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  unlink(cfg.c_str());
  unlink(fifo.c_str());
  return r;
}

// The importer's data-loss stats that come from our trace_stats, and the
// per-CPU flag it sets for a CPU with a bundle marked lost_events in the
// file: {"name[idx]" -> value}, non-zero ones only. (Not every CPU whose
// staging ring dropped has such a bundle: the mark is on that CPU's next
// bundle, which a wrapping ring may overwrite, and a loss after the CPU's
// last event has no next bundle. A marked bundle must have a counted loss
// behind it: checked here too.)
std::map<std::string, int64_t> ExpectedDataLoss(const trace::Trace& t) {
  std::map<std::string, int64_t> expected;
  std::set<uint32_t> cpus_with_loss;  // Of the staging rings.
  auto add = [&expected](const std::string& key, uint64_t v) {
    if (v != 0) expected[key] = static_cast<int64_t>(v);
  };
  for (const trace::TracePacket& p : t.packet()) {
    if (!p.has_trace_stats()) continue;
    const trace::TraceStats& s = p.trace_stats();
    for (int i = 0; i < s.buffer_stats_size(); i++) {
      const auto& b = s.buffer_stats(i);
      add(absl::StrCat("traced_buf_patches_failed[", i, "]"), b.patches_failed());
      add(absl::StrCat("traced_buf_abi_violations[", i, "]"), b.abi_violations());
      add(absl::StrCat("traced_buf_trace_writer_packet_loss[", i, "]"),
          b.trace_writer_packet_loss());
    }
    add("traced_flushes_failed[]", s.flushes_failed());
    add("traced_final_flush_failed[]",
        s.final_flush_outcome() == trace::TraceStats::FINAL_FLUSH_FAILED);
    for (const auto& l : s.ringside_staging_loss()) {
      if (l.events_lost() != 0) cpus_with_loss.insert(l.cpu());
    }
  }
  for (const trace::TracePacket& p : t.packet()) {
    if (!p.ftrace_events().lost_events()) continue;
    const uint32_t cpu = p.ftrace_events().cpu();
    expected[absl::StrCat("ftrace_cpu_has_data_loss[", cpu, "]")] = 1;
    EXPECT_TRUE(cpus_with_loss.count(cpu) > 0)
        << "a bundle of CPU " << cpu << " is marked lost_events, but no loss is counted there";
  }
  return expected;
}

struct SchedSwitches {
  int64_t count = 0;
  std::set<uint32_t> cpus;  // The CPUs with at least one switch.
};

SchedSwitches SchedSwitchesInFile(const trace::Trace& t) {
  SchedSwitches s;
  for (const trace::TracePacket& p : t.packet()) {
    int64_t n = p.ftrace_events().compact_sched().switch_timestamp_size();
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) n += e.has_sched_switch();
    s.count += n;
    if (n > 0) s.cpus.insert(p.ftrace_events().cpu());
  }
  return s;
}

// The import itself, on one file: no error or warning, the data loss our
// stats report, a slice per switch, a state for every thread_state row.
void ExpectImportsCleanly(const std::string& tp, const Recording& r) {
  ASSERT_GT(r.workload.child, 0);
  const trace::Trace t = testing::ReadTraceFile(r.path);

  std::vector<std::string> problems;
  std::map<std::string, int64_t> data_loss;
  for (const auto& row :
       Query(tp, r.path,
             "select name, ifnull(idx, ''), severity, value from stats "
             "where value > 0 and severity in ('error', 'warning', 'data_loss')")) {
    ASSERT_EQ(row.size(), 4u);
    int64_t v = 0;
    ASSERT_TRUE(absl::SimpleAtoi(row[3], &v)) << row[3];
    const std::string key = absl::StrCat(row[0], "[", row[1], "]");
    if (row[2] == "data_loss") {
      data_loss[key] = v;
    } else {
      problems.push_back(absl::StrCat(row[2], " ", key, " = ", v));
    }
  }
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
  EXPECT_EQ(data_loss, ExpectedDataLoss(t));

  // The importer opens a slice per switch, except the first compact switch
  // of each CPU, whose prev it cannot know: it counts those in
  // compact_sched_switch_skipped. (A CPU whose only switch is that first one
  // has no slice at all, so the CPUs are counted in the file, not in sched.)
  const SchedSwitches switches = SchedSwitchesInFile(t);
  EXPECT_GT(switches.count, 0);
  const int64_t skipped = QueryInt(
      tp, r.path,
      "select ifnull(sum(value), 0) from stats where name = 'compact_sched_switch_skipped'");
  EXPECT_LE(skipped, static_cast<int64_t>(switches.cpus.size()));
  EXPECT_EQ(QueryInt(tp, r.path, "select count(*) from sched"), switches.count - skipped);
  EXPECT_EQ(QueryInt(tp, r.path, "select count(*) from thread_state where state is null"), 0);
}

// The threads trace_processor could not name, and what the file holds of
// each: for a failure message.
std::string NamelessThreads(const std::string& tp, const Recording& r) {
  std::string out;
  const auto rows = Query(tp, r.path,
                          "select tid, ifnull(start_ts, ''), ifnull(end_ts, ''), "
                          "ifnull(upid, '') from thread where name is null and tid != 0");
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const auto& row : rows) {
    absl::StrAppend(&out, "thread ", absl::StrJoin(row, " "), " (tid start end upid):");
    int64_t tid = 0;
    if (!absl::SimpleAtoi(row[0], &tid)) continue;
    for (const trace::TracePacket& p : t.packet()) {
      for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
        const bool about =
            e.pid() == tid || (e.has_sched_process_free() && e.sched_process_free().pid() == tid);
        if (about) {
          absl::StrAppend(&out, " [", e.timestamp(), " pid ", e.pid(), " ",
                          e.ShortDebugString().substr(0, 160), "]");
        }
      }
      for (const auto& th : p.process_tree().threads()) {
        if (th.tid() == tid) absl::StrAppend(&out, " [descriptor ", th.ShortDebugString(), "]");
      }
    }
    out += "\n";
  }
  return out;
}

// Names and the process tree, on one file: every thread and process named
// (pid 0 is the importer's own placeholder), each of the workload's
// processes under its parent.
void ExpectNamesAndProcessTree(const std::string& tp, const Recording& r) {
  ASSERT_GT(r.workload.child, 0);
  EXPECT_EQ(QueryInt(tp, r.path, "select count(*) from thread where name is null and tid != 0"), 0)
      << NamelessThreads(tp, r);
  EXPECT_EQ(QueryInt(tp, r.path, "select count(*) from process where name is null and pid != 0"),
            0);

  // The workload: each thread in its process, each process under its parent.
  const Workload& w = r.workload;
  std::map<int64_t, std::vector<std::string>> by_tid;
  for (auto& row :
       Query(tp, r.path,
             absl::StrCat("select t.tid, t.name, p.pid, pp.pid from thread t "
                          "left join process p using (upid) "
                          "left join process pp on pp.upid = p.parent_upid where t.tid in (",
                          absl::StrJoin({w.parent, w.child, w.threads[0], w.threads[1]}, ","),
                          ")"))) {
    int64_t tid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(row[0], &tid));
    by_tid[tid] = row;
  }
  auto thread = [&by_tid](pid_t tid) {
    auto it = by_tid.find(tid);
    return it == by_tid.end() ? std::vector<std::string>(4, "<missing>") : it->second;
  };
  EXPECT_EQ(thread(w.parent)[1], "rs-tp-parent");
  EXPECT_EQ(thread(w.parent)[2], std::to_string(w.parent));
  EXPECT_EQ(thread(w.parent)[3], std::to_string(getpid()));
  // Each thread in its process, by the name it gave itself (its rename,
  // read before its fork, once made it a process of its own).
  for (pid_t tid : w.threads) {
    EXPECT_EQ(thread(tid)[1], "rs-tp-thread") << tid;
    EXPECT_EQ(thread(tid)[2], std::to_string(w.parent)) << tid;
  }
  EXPECT_EQ(thread(w.child)[1], "true");
  EXPECT_EQ(thread(w.child)[2], std::to_string(w.child));
  EXPECT_EQ(thread(w.child)[3], std::to_string(w.parent));
}

constexpr char kFtraceOnly[] =
    "buffers { size_kb: 16384 }\n"
    "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
    "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
    "  ftrace_events: \"sched/sched_wakeup_new\" ftrace_events: \"sched/sched_process_fork\"\n"
    "  ftrace_events: \"sched/sched_process_exec\" ftrace_events: \"sched/sched_process_exit\"\n"
    "  ftrace_events: \"sched/sched_process_free\" ftrace_events: \"task/task_newtask\"\n"
    "  ftrace_events: \"task/task_rename\" } } }\n"
    "durable_buffer_size_kb: 2048\n";

// The default's power events, on one file: each becomes a value of its
// CPU's cpuidle or cpufreq counter track, what the UI draws under the CPU.
// `kernel_idle`: the kernel's own count of power/cpu_idle over the recording
// (a little wider), -1 when it could not be counted.
void ExpectPowerCounters(const std::string& tp, const Recording& r, int64_t kernel_idle) {
  const trace::Trace t = testing::ReadTraceFile(r.path);
  int64_t idle = 0, freq = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      idle += e.has_cpu_idle();
      freq += e.has_cpu_frequency();
    }
  }
  // Some to check, unless the CPUs (almost) never idled meanwhile, on a
  // machine kept busy from outside: the kernel's count says which. It spans
  // the record command's start and end too, so a handful may fall outside
  // the recording (2 counted, 0 recorded, under two pipe storms); a machine
  // that idles at all idles hundreds of times a second.
  if (kernel_idle < 0 || kernel_idle >= 20) {
    EXPECT_GT(idle, 0) << "no cpu_idle event in the default recording; the kernel counted "
                       << kernel_idle;
  }
  auto counters = [&](const char* track) {
    return QueryInt(tp, r.path,
                    absl::StrCat("select count(*) from counter c join counter_track t on "
                                 "c.track_id = t.id where t.name = '",
                                 track, "'"));
  };
  EXPECT_EQ(counters("cpuidle"), idle);
  EXPECT_EQ(counters("cpufreq"), freq);
}

// A thread woken from a sleep is runnable until it runs, woken by someone:
// Perfetto builds that from sched_waking (the UI's "Runnable" and its
// waker). The workload's threads sleep 20 times each, and its tasks wait
// for one another (join, wait): some of their runnable states name a
// waker that is one of the workload's own tasks.
void ExpectRunnableStatesWithTheirWakers(const std::string& tp, const Recording& r) {
  const Workload& w = r.workload;
  const std::string tids = absl::StrJoin({w.parent, w.child, w.threads[0], w.threads[1]}, ",");
  EXPECT_GT(QueryInt(tp, r.path,
                     absl::StrCat("select count(*) from thread_state ts join thread t using (utid) "
                                  "where ts.state = 'R' and t.tid in (",
                                  tids, ")")),
            10);
  EXPECT_GT(QueryInt(tp, r.path,
                     absl::StrCat("select count(*) from thread_state ts join thread t using (utid) "
                                  "join thread waker on waker.utid = ts.waker_utid "
                                  "where ts.state = 'R' and t.tid in (",
                                  tids, ") and waker.tid in (", tids, ")")),
            0);
}

// A task reaped before the hold was freed (BPF's sched_process_free) within
// the recording, which the importer takes as the end of the thread: a later
// task under the same pid is another one.
void ExpectTheFreedTaskEnded(const std::string& tp, const Recording& r) {
  ASSERT_GT(r.freed, 0);
  const trace::Trace t = testing::ReadTraceFile(r.path);
  int frees = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.has_sched_process_free() && e.sched_process_free().pid() == r.freed) {
        frees++;
        EXPECT_EQ(e.sched_process_free().comm(), r.freed_comm);
      }
    }
  }
  EXPECT_EQ(frees, 1) << "sched_process_free of pid " << r.freed;
  EXPECT_EQ(QueryInt(tp, r.path,
                     absl::StrCat("select count(*) from thread where tid = ", r.freed,
                                  " and name = '", r.freed_comm, "' and end_ts is not null")),
            1);
}

TEST(TraceProcessorImportTest, DefaultRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  // The embedded default, as `ringside record` without -c uses it.
  ringside::testing::PerfTracepointCounter kernel_idle;
  const bool counted = kernel_idle.Open("power/cpu_idle", "").ok();
  if (counted) kernel_idle.Enable();
  const Recording r = Record("default", "", 200);
  if (counted) kernel_idle.Disable();
  ExpectImportsCleanly(tp, r);
  ExpectNamesAndProcessTree(tp, r);
  ExpectRunnableStatesWithTheirWakers(tp, r);
  ExpectPowerCounters(tp, r, counted ? kernel_idle.Count() : -1);
  ExpectTheFreedTaskEnded(tp, r);
}

// Processes in a container: their descriptors carry ringside's cgroup and
// container fields (numbers from 1000), which the importer must skip.
TEST(TraceProcessorImportTest, RecordingWithContainerAttribution) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string id(64, 'c');
  testing::ScratchCgroup cgroup("cri-containerd-" + id + ".scope");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  // Wakes every 20 ms in the container until killed.
  const pid_t resident = fork();
  if (resident == 0) {
    setpgid(0, 0);
    std::ofstream(cgroup.dir() + "/cgroup.procs") << getpid() << "\n";
    execl("/bin/sh", "/bin/sh", "-c", "while :; do /bin/sleep 0.02; done",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const Recording r = Record("containers",
                             "buffers { size_kb: 16384 }\n"
                             "data_sources { config { name: \"linux.bpf\" } }\n"
                             "durable_buffer_size_kb: 2048\n",
                             200);
  kill(-resident, SIGKILL);
  kill(resident, SIGKILL);
  waitpid(resident, nullptr, 0);
  int in_container = 0;
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& process : p.process_tree().processes()) {
      if (process.container_id() == id && process.cgroup_id() == cgroup.id()) in_container++;
    }
  }
  EXPECT_GT(in_container, 0);
  ExpectImportsCleanly(tp, r);
  ExpectNamesAndProcessTree(tp, r);
}

TEST(TraceProcessorImportTest, FtraceOnlyRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const Recording r = Record("ftrace", kFtraceOnly, 200);
  ExpectImportsCleanly(tp, r);
}

// Without flush_period_ms: the importer warns unless ringside fills it in.
TEST(TraceProcessorImportTest, StreamingRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const Recording r = Record("stream",
                             "buffers { size_kb: 16384 }\n"
                             "data_sources { config { name: \"linux.bpf\" } }\n"
                             "write_into_file: true\nfile_write_period_ms: 100\n"
                             "durable_buffer_size_kb: 2048\n",
                             300);
  ExpectImportsCleanly(tp, r);
  ExpectNamesAndProcessTree(tp, r);
}

// The same tables from a compressed file as from its plain twin (the same
// packets, inflated): sched, thread states, threads, processes, counters.
void ExpectTheSameAsItsPlainTwin(const std::string& tp, const Recording& r) {
  const std::string plain = r.path + ".plain";
  std::ofstream(plain, std::ios::binary) << testing::ReadTraceFile(r.path).SerializeAsString();
  for (const char* table : {"sched", "thread_state", "thread", "process", "counter", "slice"}) {
    const std::string sql = absl::StrCat("select count(*) from ", table);
    EXPECT_EQ(QueryInt(tp, r.path, sql), QueryInt(tp, plain, sql)) << table;
  }
  unlink(plain.c_str());
}

// Every packet of `path` is a compressed one of the codec's field.
void ExpectAllPacketsCompressed(const std::string& path, bool zstd) {
  std::ifstream in(path, std::ios::binary);
  trace::Trace raw;
  ASSERT_TRUE(raw.ParseFromString(std::string((std::istreambuf_iterator<char>(in)), {})));
  ASSERT_GT(raw.packet_size(), 0);
  for (const trace::TracePacket& p : raw.packet()) {
    ASSERT_TRUE(zstd ? p.has_zstd_compressed_packets() : p.has_compressed_packets());
  }
}

// A recording compressed with each codec, as the config's `compression`
// (Perfetto's) asks, whole and streamed (each drain's write compressed on
// the drain thread): it imports as cleanly as a plain one, to the same
// tables.
TEST(TraceProcessorImportTest, CompressedRecordings) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  struct Case {
    const char* name;
    const char* compression;
    const char* streaming;
  };
  for (const Case& c :
       {Case{"zstd", "zstd { level: 3 }", ""}, Case{"deflate", "deflate {}", ""},
        Case{"zstd-stream", "zstd {}", "write_into_file: true\nfile_write_period_ms: 100\n"}}) {
    SCOPED_TRACE(c.name);
    const bool zstd = absl::StartsWith(c.compression, "zstd");
    const Recording r = Record(c.name,
                               absl::StrCat("buffers { size_kb: 16384 }\n"
                                            "data_sources { config { name: \"linux.bpf\" } }\n"
                                            "durable_buffer_size_kb: 2048\n",
                                            c.streaming, "compression { ", c.compression, " }\n"),
                               300);
    ExpectAllPacketsCompressed(r.path, zstd);
    ExpectImportsCleanly(tp, r);
    ExpectNamesAndProcessTree(tp, r);
    ExpectTheSameAsItsPlainTwin(tp, r);
  }
}

// The agent's rotating files, compressed as its config asks: the session
// drains into a CompressingSink over a RotatingTraceFile (as AgentService
// does), files cut by size and age under a storm. Each file opens alone:
// whole compressed packets, no import error, every scheduled pid named, the
// same tables as its plain twin, and within the size limit on disk.
TEST(TraceProcessorImportTest, RotatedCompressedFilesEachOpenAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  constexpr uint64_t kMaxFileBytes = 256 << 10;
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig(absl::StrCat("buffers { size_kb: 16384 }\n"
                               "data_sources { config { name: \"linux.bpf\" } }\n"
                               "durable_buffer_size_kb: 2048\n"
                               "write_into_file: true\nfile_write_period_ms: 100\n"
                               "file_rotation_period_ms: 400\nmax_file_size_bytes: ",
                               kMaxFileBytes, "\ncompression { zstd {} }\n"),
                  "rotated.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const std::string dir = TempPath("rotated");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  RotatingTraceFile::Options o;
  o.dir = dir;
  o.hostname = "rs-tp-test";
  o.max_file_bytes = cfg->max_file_size_bytes();
  o.max_file_age = absl::Milliseconds(cfg->file_rotation_period_ms());
  absl::StatusOr<std::unique_ptr<RotatingTraceFile>> files = RotatingTraceFile::Open(o);
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<std::unique_ptr<PacketCompressor>> zstd =
      PacketCompressor::Create(PacketCompressionOf(*cfg));
  ASSERT_TRUE(zstd.ok()) << zstd.status();
  CompressingSink compressing(files->get(), std::move(*zstd));
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(1);
  {
    absl::StatusOr<std::unique_ptr<TracingSession>> session = TracingSession::Create(*cfg);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->StartIntoFiles(&compressing).ok());
    absl::SleepFor(absl::Milliseconds(1500));
    ASSERT_TRUE((*session)->Stop().ok());
    ASSERT_TRUE((*session)->WriteTrace(&compressing).ok());
  }
  ringside::testing::StopProcesses(storm);
  EXPECT_GT(compressing.bytes_in(), compressing.bytes_out() * 2);

  std::vector<std::string> names;
  (*files)->WaitForSidecars();
  for (const std::string& name : testing::ListTraces(dir)) names.push_back(name);
  std::sort(names.begin(), names.end());
  EXPECT_GE(names.size(), 3u) << "1.5 s in files of at most 400 ms";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    Recording r;  // Removes the file.
    r.path = absl::StrCat(dir, "/", name);
    EXPECT_TRUE(IsStreamFileName(name, o.hostname));
    struct stat st;
    ASSERT_EQ(stat(r.path.c_str(), &st), 0);
    EXPECT_LE(static_cast<uint64_t>(st.st_size), kMaxFileBytes);
    ExpectAllPacketsCompressed(r.path, /*zstd=*/true);
    std::vector<std::string> problems;
    for (const auto& row : Query(tp, r.path,
                                 "select name, value from stats where value > 0 and "
                                 "severity in ('error', 'warning')")) {
      problems.push_back(absl::StrJoin(row, " = "));
    }
    EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
    EXPECT_GT(QueryInt(tp, r.path, "select count(*) from sched"), 0);
    int code = -1;
    const std::string json = testing::RunRingsideCapture({"inspect", "--json", r.path}, &code);
    ASSERT_EQ(code, 0) << json;
    EXPECT_EQ(nlohmann::json::parse(json)["sched_pids"]["unresolved"].get<int>(), 0) << json;
    ExpectTheSameAsItsPlainTwin(tp, r);
    // Each with its sidecar, which says what the file is.
    std::ifstream in(r.path + ".json");
    const nlohmann::json sidecar = nlohmann::json::parse(in, nullptr, false);
    EXPECT_EQ(sidecar.value("compression", nlohmann::json::object()).value("codec", ""), "zstd");
    EXPECT_EQ(sidecar.value("size_bytes", 0u), static_cast<uint64_t>(st.st_size));
    unlink((r.path + ".json").c_str());
  }
  rmdir(dir.c_str());
}

// Files of two machines in one TAR, as Perfetto's importer takes several
// traces: every packet carries its machine's id, so the importer keeps two
// machines, named after each file's SystemInfo.machine_name, each with its
// own processes (pids collide) and scheduling, and no error. "Machine" B
// is this one in a mount and UTS namespace of its own: another
// /etc/machine-id and host name (the clocks are the same here; lining
// machines up on REALTIME is the importer's, tested by the kernel matrix).
TEST(TraceProcessorImportTest, TwoMachinesInOneTarStayApartAndNamed) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string cfg = TempPath("machines.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 8192 }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n"
                        "durable_buffer_size_kb: 2048\n";
  const std::string dir = TempPath("machines");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string a = dir + "/node-a.pftrace", b = dir + "/node-b.pftrace";
  ASSERT_EQ(testing::RunRingside({"record", "-c", cfg, "-t", "1s", "-o", a}), 0);
  const std::string machine_id = dir + "/machine-id";
  std::ofstream(machine_id) << "0123456789abcdef0123456789abcdef\n";
  // Without /etc/machine-id here, B's id is a hash of its other name.
  const std::string bind = access("/etc/machine-id", F_OK) == 0
                               ? "mount --bind " + machine_id + " /etc/machine-id && "
                               : "";
  int code = -1;
  testing::RunProgramCapture(
      "/usr/bin/unshare",
      {"--mount", "--uts", "--propagation", "private", "/bin/sh", "-c",
       bind + "hostname rs-node-b && exec " + ringside::testing::RingsideBinary() + " record -c " +
           cfg + " -t 1s -o " + b},
      &code);
  ASSERT_EQ(code, 0) << "ringside record in namespaces of its own";
  utsname u;
  ASSERT_EQ(uname(&u), 0);
  const std::string tar = dir + "/incident.tar";
  testing::RunProgramCapture("/bin/tar", {"cf", tar, "-C", dir, "node-a.pftrace", "node-b.pftrace"},
                             &code);
  ASSERT_EQ(code, 0);

  // Alone, a file is one machine, named.
  const auto alone = Query(tp, a, "select name from machine");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0][0], u.nodename);
  // Together, two, each with its id, its processes and its scheduling.
  const auto machines = Query(tp, tar,
                              "select m.name, m.raw_id, "
                              "(select count(*) from process p where p.machine_id = m.id), "
                              "(select count(*) from process p where p.machine_id = m.id "
                              "and p.pid = 1), "
                              "(select count(*) from sched s join cpu c using (ucpu) "
                              "where c.machine_id = m.id) "
                              "from machine m order by m.name");
  ASSERT_EQ(machines.size(), 2u);
  const std::vector<std::string> names = {machines[0][0], machines[1][0]};
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{u.nodename, "rs-node-b"}));
  for (const auto& m : machines) {
    SCOPED_TRACE(m[0]);
    int64_t processes = 0, init = 0, switches = 0;
    ASSERT_TRUE(absl::SimpleAtoi(m[2], &processes) && absl::SimpleAtoi(m[3], &init) &&
                absl::SimpleAtoi(m[4], &switches));
    EXPECT_GT(processes, 1);
    EXPECT_EQ(init, 1);
    EXPECT_GT(switches, 0);
    // Never a part of the machine id itself (machine-id(5): keep it private).
    if (m[0] == "rs-node-b" && !bind.empty()) {
      for (uint32_t part : {0x01234567u, 0x89abcdefu}) EXPECT_NE(m[1], std::to_string(part));
    }
  }
  EXPECT_NE(machines[0][1], machines[1][1]);
  EXPECT_TRUE(
      Query(tp, tar, "select name from stats where value > 0 and severity = 'error'").empty());

  // `ringside merge`: the same two machines, the trace on REALTIME (its
  // manifest), so its timestamps are Unix time.
  const std::string merged = dir + "/merged.tar";
  ASSERT_EQ(testing::RunRingside({"merge", "-o", merged, a, b}), 0);
  EXPECT_EQ(QueryInt(tp, merged, "select count(*) from machine"), 2);
  EXPECT_GT(QueryInt(tp, merged, "select min(ts) from sched"),
            int64_t{1'700'000'000} * 1'000'000'000);
  EXPECT_TRUE(
      Query(tp, merged, "select name from stats where value > 0 and severity = 'error'").empty());
  for (const std::string& f : {a, b, machine_id, tar, merged}) unlink(f.c_str());
  rmdir(dir.c_str());
}

TEST(TraceProcessorImportTest, WrappedRingRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  const Recording r = Record("wrap",
                             "buffers { size_kb: 64 fill_policy: RING_BUFFER }\n"
                             "data_sources { config { name: \"linux.bpf\" } }\n"
                             "durable_buffer_size_kb: 2048\n",
                             300);
  ringside::testing::StopProcesses(storm);
  uint64_t overwritten = 0, events_overwritten = 0;
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const auto& p : t.packet()) {
    for (const auto& b : p.trace_stats().buffer_stats()) overwritten += b.bytes_overwritten();
    for (const auto& l : p.trace_stats().ringside_event_loss()) {
      if (l.stage() == "buffer") events_overwritten += l.events_lost();
    }
  }
  EXPECT_GT(overwritten, 0u) << "the ring did not wrap";
  // The overwritten events, in events (ringside_event_loss), import too.
  EXPECT_GT(events_overwritten, 0u);
  ExpectImportsCleanly(tp, r);
}

TEST(TraceProcessorImportTest, DiscardRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  const Recording r = Record("discard",
                             "buffers { size_kb: 64 fill_policy: DISCARD }\n"
                             "data_sources { config { name: \"linux.bpf\" } }\n"
                             "durable_buffer_size_kb: 2048\n",
                             300);
  ringside::testing::StopProcesses(storm);
  uint64_t discarded = 0, events_discarded = 0;
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const auto& p : t.packet()) {
    for (const auto& b : p.trace_stats().buffer_stats()) discarded += b.chunks_discarded();
    for (const auto& l : p.trace_stats().ringside_event_loss()) {
      if (l.stage() == "buffer") events_discarded += l.events_lost();
    }
  }
  EXPECT_GT(discarded, 0u) << "the buffer did not fill";
  EXPECT_GT(events_discarded, 0u);
  ExpectImportsCleanly(tp, r);
}

TEST(TraceProcessorImportTest, BpfRingDropsRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  const Recording r = Record("drops",
                             "buffers { size_kb: 65536 }\n"
                             "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
                             "  ring_size_kb: 4 drain_period_ms: 1000 } } }\n"
                             "durable_buffer_size_kb: 2048\n",
                             2500);
  ringside::testing::StopProcesses(storm);
  uint64_t lost = 0;
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const auto& p : t.packet()) {
    for (const auto& l : p.trace_stats().ringside_staging_loss()) lost += l.events_lost();
  }
  EXPECT_GT(lost, 0u) << "the BPF rings dropped nothing";
  ExpectImportsCleanly(tp, r);
}

// A CLONE_SNAPSHOT of a running session, as `ringside agent` writes them:
// it imports as cleanly as a recording, and the importer takes its
// clone_snapshot_trigger as the trace's trigger, at the trigger's time.
TEST(TraceProcessorImportTest, SnapshotWithItsCloneSnapshotTrigger) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF and CAP_PERFMON)";
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 16384 }\n"
      "data_sources { config { name: \"linux.bpf\" } }\n"
      "durable_buffer_size_kb: 2048\n"
      "builtin_data_sources { snapshot_interval_ms: 100 }\n",
      "snapshot.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  // Forked while this process has no threads of the session's yet.
  PendingWorkload pending = ForkForkExecExitWorkload();
  absl::StatusOr<std::unique_ptr<TracingSession>> session = TracingSession::Create(*cfg);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Start().ok());
  Recording r;
  r.path = TempPath("snapshot.pftrace");
  r.workload = RunPendingWorkload(pending);
  // Clock snapshots in the ring (every 100 ms here), between the session's
  // start and the clone's: the importer refuses one out of time order.
  absl::SleepFor(absl::Milliseconds(350));
  const int64_t fired_at = BoottimeNowNs();
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = (*session)->CloneSnapshot(
      SnapshotTrigger{"rs_tp_trigger", "trace_processor_import_test", 4242, fired_at});
  ASSERT_TRUE(snap.ok()) << snap.status();
  // With what the agent adds to a snapshot's trace_stats (ringside
  // extensions the importer must skip).
  trace::TraceStats extra;
  trace::TraceStats::TriggerCount* count = extra.add_ringside_triggers();
  count->set_name("rs_tp_trigger");
  count->set_fired(1);
  count->set_joined(2);
  count->set_suppressed(3);
  for (int64_t at : {fired_at, fired_at + 1}) {
    trace::TraceStats::SnapshotTrigger* t = extra.add_ringside_snapshot_triggers();
    t->set_trigger_name("rs_tp_trigger");
    t->set_producer_name("trace_processor_import_test");
    t->set_trusted_producer_uid(4242);
    t->set_timestamp(static_cast<uint64_t>(at));
  }
  (*snap)->MergeIntoStats(extra);
  StringSink file;
  ASSERT_TRUE((*snap)->WriteTo(&file).ok());
  // And a second snapshot, compressed as the agent's shipped config writes
  // them (a snapshot is read once).
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap2 = (*session)->CloneSnapshot(
      SnapshotTrigger{"rs_tp_trigger", "trace_processor_import_test", 4242, fired_at});
  ASSERT_TRUE(snap2.ok()) << snap2.status();
  StringSink zstd_file;
  absl::StatusOr<std::unique_ptr<PacketCompressor>> zstd =
      PacketCompressor::Create({PacketCodec::kZstd, 0});
  ASSERT_TRUE(zstd.ok());
  CompressingSink compressing(&zstd_file, std::move(*zstd));
  ASSERT_TRUE((*snap2)->WriteTo(&compressing).ok());
  ASSERT_TRUE((*session)->Stop().ok());
  std::ofstream(r.path, std::ios::binary) << file.data();
  Recording compressed;
  compressed.workload = r.workload;
  compressed.path = TempPath("snapshot.zst.pftrace");
  std::ofstream(compressed.path, std::ios::binary) << zstd_file.data();
  ExpectAllPacketsCompressed(compressed.path, /*zstd=*/true);
  EXPECT_LT(zstd_file.data().size(), file.data().size() / 2);
  ExpectImportsCleanly(tp, compressed);
  ExpectTheSameAsItsPlainTwin(tp, compressed);

  ExpectImportsCleanly(tp, r);
  ExpectNamesAndProcessTree(tp, r);
  const auto slices = Query(tp, r.path, "select ts, dur from slice where name = 'rs_tp_trigger'");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0][0], std::to_string(fired_at));
  EXPECT_EQ(slices[0][1], "0");
  EXPECT_EQ(QueryInt(tp, r.path,
                     "select int_value from args join slice using (arg_set_id) "
                     "where slice.name = 'rs_tp_trigger' and args.key = 'trusted_producer_uid'"),
            4242);
  const auto names =
      Query(tp, r.path, "select str_value from metadata where name = 'trace_trigger'");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0][0], "rs_tp_trigger");
  int ring_clocks = 0;
  const trace::Trace t = testing::ReadTraceFile(r.path);
  for (const trace::TracePacket& p : t.packet()) {
    ring_clocks += p.has_clock_snapshot() && p.trusted_packet_sequence_id() != kServiceSequenceId;
  }
  EXPECT_GE(ring_clocks, 2);

  // Beside another machine's file in one TAR (the same packets under
  // another machine id): each machine keeps its scheduling, no error.
  trace::Trace other = t;
  for (trace::TracePacket& p : *other.mutable_packet()) p.set_machine_id(0x0badcafe);
  const std::string other_path = TempPath("snapshot-other.pftrace");
  std::ofstream(other_path, std::ios::binary) << other.SerializeAsString();
  const std::string tar = TempPath("snapshots.tar");
  ASSERT_EQ(testing::RunRingside({"merge", "-o", tar, r.path, other_path}), 0);
  const auto per_machine = Query(tp, tar,
                                 "select c.machine_id, count(*) from sched s join cpu c "
                                 "using (ucpu) group by c.machine_id");
  ASSERT_EQ(per_machine.size(), 2u);
  EXPECT_EQ(per_machine[0][1], per_machine[1][1]);
  EXPECT_NE(per_machine[0][1], "0");
  EXPECT_TRUE(
      Query(tp, tar, "select name from stats where value > 0 and severity = 'error'").empty());
  for (const std::string& f : {r.path, other_path, tar}) unlink(f.c_str());
}

}  // namespace
}  // namespace ringside::agent
