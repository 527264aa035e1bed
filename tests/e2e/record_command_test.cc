// `ringside record` end to end: the real binary, the real kernel, the file.

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

using testing::RunRingside;
using testing::TempPath;

trace::Trace ReadTrace(const std::string& path) { return testing::ReadTraceFile(path); }

TEST(RecordCommandTest, RecordsAValidSelfContainedTraceWithKernelEvents) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("basic.pftrace");
  ASSERT_EQ(RunRingside({"record", "--duration", "2s", "-o", out}), 0);
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // Traces are private by default.
  const trace::Trace t = ReadTrace(out);
  int uuid = 0, system_info = 0, clocks = 0, config = 0, trees = 0, bundles = 0, stats = 0,
      ftrace_stats = 0;
  uint64_t events = 0;
  for (const trace::TracePacket& p : t.packet()) {
    EXPECT_TRUE(p.has_trusted_packet_sequence_id());
    uuid += p.has_trace_uuid();
    system_info += p.has_system_info();
    if (p.has_system_info()) {
      utsname u;
      ASSERT_EQ(uname(&u), 0);
      EXPECT_EQ(p.system_info().hostname(), u.nodename);
      EXPECT_GT(p.system_info().num_cpus(), 0u);
    }
    if (p.has_trace_stats()) {
      // Every data source reports its producer-side figures.
      EXPECT_GE(p.trace_stats().ringside_producer_stats_size(), 1);
      EXPECT_EQ(p.trace_stats().buffer_stats_size(), 1);
    }
    clocks += p.has_clock_snapshot();
    config += p.has_trace_config();
    trees += p.has_process_tree();
    stats += p.has_trace_stats();
    ftrace_stats += p.has_ftrace_stats();
    if (p.has_ftrace_events()) {
      EXPECT_GT(p.trusted_pid(), 0);  // Data packets say which process wrote them.
      bundles++;
      events += static_cast<uint64_t>(p.ftrace_events().event_size() +
                                      p.ftrace_events().compact_sched().switch_timestamp_size());
    }
  }
  EXPECT_EQ(uuid, 1);
  EXPECT_EQ(system_info, 1);
  EXPECT_EQ(clocks, 2);
  EXPECT_EQ(config, 1);
  // The /proc scan at the end, and the durable buffer's descriptors (one
  // packet per process and thread, seeded from the scan at the start).
  EXPECT_GT(trees, 2);
  EXPECT_EQ(stats, 1);
  EXPECT_EQ(ftrace_stats, 2);
  EXPECT_GT(bundles, 0);
  EXPECT_GT(events, 0u);
  int named_processes = 0;
  for (const trace::TracePacket& p : t.packet()) {
    named_processes += p.process_tree().processes_size();
  }
  EXPECT_GT(named_processes, 1);
  unlink(out.c_str());
}

// The proof, with the embedded default config (BPF where it loads,
// ftrace in its place otherwise): sched events on every online CPU, the
// workload's execs with their filenames, every pid that ran resolvable to
// a name, and the stats of every stage.
TEST(RecordCommandTest, DefaultConfigRecordsSchedOnEveryCpuExecsAndResolvablePids) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("default.pftrace");
  // Busy on every CPU for a moment, then 30 execs of /bin/true.
  const std::string workload =
      "for c in $(seq $(nproc)); do (i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done) & done; "
      "wait; for i in $(seq 30); do /bin/true; done";
  ASSERT_EQ(RunRingside({"record", "-o", out, "--", "/bin/sh", "-c", workload}), 0);
  const trace::Trace t = ReadTrace(out);
  std::set<uint32_t> cpus_with_switches;
  std::set<int32_t> named;  // pids a descriptor or event gives a name to
  std::set<int32_t> ran;    // pids switched in
  int true_execs = 0, trace_stats = 0;
  for (const trace::TracePacket& p : t.packet()) {
    trace_stats += p.has_trace_stats();
    for (const auto& th : p.process_tree().threads()) named.insert(th.tid());
    for (const auto& pr : p.process_tree().processes()) named.insert(pr.pid());
    if (!p.has_ftrace_events()) continue;
    const auto& b = p.ftrace_events();
    const auto& cs = b.compact_sched();
    if (cs.switch_timestamp_size() > 0) cpus_with_switches.insert(b.cpu());
    for (int i = 0; i < cs.switch_next_pid_size(); i++) {
      ran.insert(cs.switch_next_pid(i));
      // compact_sched names every task it switches in.
      if (!cs.intern_table(static_cast<int>(cs.switch_next_comm_index(i))).empty()) {
        named.insert(cs.switch_next_pid(i));
      }
    }
    for (const trace::FtraceEvent& e : b.event()) {
      if (e.has_sched_switch()) {
        cpus_with_switches.insert(b.cpu());
        ran.insert(e.sched_switch().next_pid());
        named.insert(e.sched_switch().next_pid());
      }
      if (e.has_sched_process_fork()) named.insert(e.sched_process_fork().child_pid());
      if (e.has_sched_process_exec()) {
        named.insert(e.sched_process_exec().pid());
        true_execs += e.sched_process_exec().filename() == "/bin/true";
      }
    }
  }
  EXPECT_EQ(cpus_with_switches.size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_EQ(true_execs, 30);
  ran.erase(0);  // The idle tasks.
  for (int32_t pid : ran) EXPECT_TRUE(named.count(pid)) << "pid " << pid << " has no name";
  EXPECT_EQ(trace_stats, 1);
  unlink(out.c_str());
}

// Each thread says what it does (top -H, perf, the trace's own thread
// names): a user who sees ringside on a CPU can tell the BPF reader from
// the ftrace reader or the buffer owner.
TEST(RecordCommandTest, ItsThreadsAreNamedByWhatTheyDo) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("names.pftrace");
  const std::string names = TempPath("names.txt");
  // CMD's parent is ringside record: its threads' names, once recording.
  ASSERT_EQ(RunRingside({"record", "-o", out, "--", "/bin/sh", "-c",
                         "cat /proc/$PPID/task/*/comm > " + names}),
            0);
  std::ifstream in(names);
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) seen.insert(line);
  EXPECT_TRUE(seen.count("rs-bpf") || seen.count("rs-ftrace")) << "no reader thread named";
  EXPECT_TRUE(seen.count("rs-owner"));
  EXPECT_TRUE(seen.count("rs-polled"));  // The default's process and system counters.
  // The main thread keeps the program's name.
  EXPECT_TRUE(seen.count("ringside"));
  unlink(out.c_str());
  unlink(names.c_str());
}

// When linux.bpf cannot load, the ftrace source records its fallback
// events, so scheduling and execs are still there.
TEST(RecordCommandTest, FtraceTakesOverWhenBpfCannotLoad) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("nobpf.pbtxt");
  std::ofstream f(cfg);
  f << "buffers { size_kb: 8192 }\n"
       "data_sources { config { name: \"linux.bpf\" } }\n"
       "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
       "  ftrace_events: \"power/cpu_idle\"\n"
       "  bpf_fallback_events: \"sched/sched_switch\"\n"
       "  bpf_fallback_events: \"sched/sched_process_exec\" } } }\n";
  f.close();
  const std::string out = TempPath("nobpf.pftrace");
  // ringside where the bpf() syscall is refused (as a seccomp profile of a
  // container does): BPF cannot load, tracefs works.
  const pid_t pid = fork();
  if (pid == 0) {
    sock_filter deny_bpf[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {static_cast<unsigned short>(std::size(deny_bpf)), deny_bpf};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      _exit(100);
    }
    _exit(RunRingside({"record", "-c", cfg, "-o", out, "--", "/bin/sh", "-c",
                       "for i in 1 2 3; do /bin/true; done"}));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_NE(WEXITSTATUS(status), 100) << "cannot install a seccomp filter";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const trace::Trace t = ReadTrace(out);
  uint64_t switches = 0;
  int execs = 0;
  for (const trace::TracePacket& p : t.packet()) {
    switches += static_cast<uint64_t>(p.ftrace_events().compact_sched().switch_timestamp_size());
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      execs += e.sched_process_exec().filename() == "/bin/true";
    }
  }
  EXPECT_GT(switches, 0u);
  EXPECT_EQ(execs, 3);
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// write_into_file: the file is a valid trace while it grows, and at the end
// holds every packet exactly once (reads consume, scraped chunks completed
// later are not read twice). `compress`: with -z, each drain's write
// compressed on its own, so the file is whole after each.
void StreamIntoAValidGrowingFileWithoutDuplicates(bool compress) {
  const std::string cfg = TempPath("stream.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 8192 }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  bpf_fallback_events: \"sched/sched_switch\"\n"
                        "  bpf_fallback_events: \"sched/sched_process_exec\" } } }\n"
                        "write_into_file: true\nfile_write_period_ms: 100\nflush_period_ms: 150\n";
  const std::string out = TempPath("stream.pftrace");
  // /bin/true under a name of this test's own: the recording is the whole
  // machine's, and other tests exec /bin/true too (341 counted for 40).
  const std::string own_true = TempPath("rs-stream-true");
  unlink(own_true.c_str());
  ASSERT_EQ(symlink("/bin/true", own_true.c_str()), 0) << std::strerror(errno);
  // The command ends once the test has read the growing file three times
  // (or after a minute): on a loaded machine, with a sanitizer, a fixed
  // two seconds of execs had ended before a third read (1 of 3 seen).
  const std::string enough = TempPath("stream.enough");
  unlink(enough.c_str());
  pid_t pid = 0;
  std::vector<std::string> args = {"record", "-c", cfg, "-o", out};
  if (compress) args.push_back("-z");
  args.insert(args.end(),
              {"--", "/bin/sh", "-c",
               "for i in $(seq 40); do " + own_true + "; sleep 0.03; done; i=0; while [ ! -e " +
                   enough + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"});
  RunRingside(args, &pid, /*wait=*/false);
  int snapshots = 0, execs_while_recording = 0;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    usleep(150 * 1000);
    if (snapshots >= 3 && execs_while_recording > 0) {
      std::ofstream(enough).flush();
      continue;
    }
    struct stat st;
    if (stat(out.c_str(), &st) != 0 || st.st_size == 0) continue;
    const trace::Trace t = ReadTrace(out);  // Parses: whole packets only.
    ASSERT_GT(t.packet_size(), 0);
    EXPECT_TRUE(t.packet(0).has_trace_uuid());
    snapshots++;
    // flush_period_ms brings what writers still hold in open chunks: the
    // first execs are in the file while the command is still running.
    for (const trace::TracePacket& p : t.packet()) {
      for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
        execs_while_recording += e.sched_process_exec().filename() == own_true;
      }
    }
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_GE(snapshots, 3);
  EXPECT_GT(execs_while_recording, 0);
  const trace::Trace t = ReadTrace(out);
  std::set<std::string> bundles;
  int execs = 0;
  for (const trace::TracePacket& p : t.packet()) {
    if (!p.has_ftrace_events()) continue;
    const std::string key =
        std::to_string(p.trusted_packet_sequence_id()) + p.ftrace_events().SerializeAsString();
    EXPECT_TRUE(bundles.insert(key).second) << "a bundle was written twice";
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      execs += e.sched_process_exec().filename() == own_true;
    }
  }
  EXPECT_EQ(execs, 40);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
  // On disk: every packet a zstd-compressed one, or none.
  std::ifstream in(out, std::ios::binary);
  trace::Trace raw;
  ASSERT_TRUE(raw.ParseFromString(std::string((std::istreambuf_iterator<char>(in)), {})));
  for (const trace::TracePacket& p : raw.packet()) {
    ASSERT_EQ(p.has_zstd_compressed_packets(), compress);
  }
  unlink(cfg.c_str());
  unlink(out.c_str());
  unlink(enough.c_str());
  unlink(own_true.c_str());
}

TEST(RecordCommandTest, StreamingWritesAValidGrowingFileWithoutDuplicates) {
  RINGSIDE_REQUIRE_TRACEFS();
  StreamIntoAValidGrowingFileWithoutDuplicates(/*compress=*/false);
}

TEST(RecordCommandTest, CompressedStreamingWritesAValidGrowingFileWithoutDuplicates) {
  RINGSIDE_REQUIRE_TRACEFS();
  StreamIntoAValidGrowingFileWithoutDuplicates(/*compress=*/true);
}

// max_file_size_bytes ends a streaming recording, with a complete file.
TEST(RecordCommandTest, StreamingStopsAtMaxFileSize) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("max.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 8192 }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  bpf_fallback_events: \"sched/sched_switch\" } } }\n"
                        "write_into_file: true\nfile_write_period_ms: 100\n"
                        "max_file_size_bytes: 200000\n";
  const std::string out = TempPath("max.pftrace");
  // A workload that outlasts the test unless the size limit stops ringside.
  const pid_t busy = fork();
  if (busy == 0) {
    for (int i = 0; i < 200000; i++) usleep(20);
    _exit(0);
  }
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunRingside({"record", "-c", cfg, "-o", out, "--duration", "60s"}), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_GE(st.st_size, 200000);
  const trace::Trace t = ReadTrace(out);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// One CPU's switches as a source recorded them, in time order. `prev` is
// ftrace's only: the compact form BPF's are written in has none.
struct CpuSwitch {
  uint64_t ts;
  int32_t prev;
  int32_t next;
};

// How one CPU's switches of the BPF source line up with ftrace's, over
// [lo, hi] of ftrace's clock: each ftrace switch is matched, in order, to
// the nearest BPF switch still unmatched into the same task within 50 ms
// of its time. The two probes of one tracepoint hit run back to back, but
// a virtual CPU can be stopped between them: 0.3 ms was seen here beside
// hackbench, and once, in a run with 1.2 M switches, one of ftrace's went
// unmatched with a slack of 5 ms (why was not recorded: a failure now
// names BPF's nearest switch into that task). A loss hides only where
// BPF has a switch into the same task that ftrace missed within the
// slack, and a loss rarely comes alone.
//
// BPF's own switches, those ftrace lacks, must each fill a break in
// ftrace's chain: ftrace misses switches without counting them (out of
// the idle task, about half of them on this kernel, and out of some
// tasks: the sandbox's tokio-rt-worker threads, ~1% of theirs), and where
// it did, the switch after the gap is out of a task that ftrace never saw
// switched in (X->A, then B->Y). A run of BPF's own switches between two
// matched ones is explained when ftrace's chain breaks between their
// partners; one anywhere else is a switch BPF made up or repeated. (The run
// need not end in B: now and then both sources miss the switch into B,
// which came after one out of a tokio-rt-worker thread here, 1 to 3 times
// in 17,000 switches: ftrace has X->0, B->A; BPF ->0, ->A, ->A.)
struct SwitchAlignment {
  int64_t matched = 0;
  int64_t only_ftrace = 0;  // BPF lost them.
  int64_t only_bpf = 0;
  int64_t only_bpf_unexplained = 0;  // Not in a break of ftrace's chain.
  int64_t bpf_repeated = 0;          // A BPF switch the same as the one before.
  uint64_t widest_gap_ns = 0;        // Between the two records of a matched switch.
  std::string unmatched;             // The first few of ftrace's, for a failure.
  std::string unexplained;           // The first few of BPF's, for a failure.
};

SwitchAlignment AlignSwitches(const std::vector<CpuSwitch>& bpf,
                              const std::vector<CpuSwitch>& ftrace, uint64_t lo, uint64_t hi) {
  constexpr uint64_t kSlack = 50'000'000;
  SwitchAlignment a;
  std::vector<std::optional<size_t>> partner(bpf.size());  // Its ftrace switch.
  size_t first = 0;  // Every BPF switch before it is taken or too early.
  for (size_t j = 0; j < ftrace.size(); j++) {
    const CpuSwitch& f = ftrace[j];
    if (f.ts < lo || f.ts > hi) continue;
    while (first < bpf.size() && (partner[first] || bpf[first].ts + kSlack < f.ts)) first++;
    std::optional<size_t> best;
    auto distance = [&](size_t k) {
      return bpf[k].ts > f.ts ? bpf[k].ts - f.ts : f.ts - bpf[k].ts;
    };
    for (size_t k = first; k < bpf.size() && bpf[k].ts <= f.ts + kSlack; k++) {
      // Past f and its best so far, the rest are only farther: at a storm's
      // rates the slack holds thousands.
      if (best && bpf[k].ts > f.ts && distance(k) >= distance(*best)) break;
      if (partner[k] || bpf[k].next != f.next) continue;
      if (!best || distance(k) < distance(*best)) best = k;
    }
    if (best) {
      partner[*best] = j;
      a.matched++;
      a.widest_gap_ns = std::max(a.widest_gap_ns, distance(*best));
    } else if (++a.only_ftrace <= 5) {
      // The nearest of BPF's switches into the same task, taken or not.
      std::optional<int64_t> nearest;
      for (const CpuSwitch& b : bpf) {
        const int64_t d = static_cast<int64_t>(b.ts - f.ts);
        if (b.next == f.next && (!nearest || std::abs(d) < std::abs(*nearest))) nearest = d;
      }
      absl::StrAppend(
          &a.unmatched, "\n  at ", f.ts, " ", f.prev, "->", f.next,
          nearest ? absl::StrCat(": BPF's nearest into ", f.next, " is ", *nearest, " ns away")
                  : "");
    }
  }
  // BPF's clock is ftrace's within the slack: its window is the same one,
  // narrowed by the slack so that no switch ftrace had just outside it
  // counts as BPF's own. Each run of own switches is checked against the
  // matched switches around it; one with none on a side lies at an edge of
  // the window.
  std::optional<size_t> before;  // The last matched switch.
  for (size_t i = 0; i < bpf.size(); i++) {
    a.bpf_repeated += i > 0 && bpf[i].ts == bpf[i - 1].ts && bpf[i].next == bpf[i - 1].next;
    if (partner[i]) {
      before = i;
      continue;
    }
    if (bpf[i].ts < lo + kSlack || bpf[i].ts + kSlack > hi) continue;
    a.only_bpf++;
    size_t end = i;  // The run of own switches [i, end].
    while (end + 1 < bpf.size() && !partner[end + 1]) end++;
    if (end + 1 == bpf.size() || !before) continue;
    const CpuSwitch& from = ftrace[*partner[*before]];
    const CpuSwitch& to = ftrace[*partner[end + 1]];
    const bool explained = *partner[end + 1] > *partner[*before] && from.next != to.prev;
    if (explained) continue;
    if (++a.only_bpf_unexplained <= 5) {
      absl::StrAppend(&a.unexplained, "\n  at ", bpf[i].ts, " ->", bpf[i].next, " (", end - i + 1,
                      " of BPF's own in a row, the last ->", bpf[end].next, "), between ftrace's ",
                      from.ts, " ", from.prev, "->", from.next, " and ", to.ts, " ", to.prev, "->",
                      to.next);
    }
  }
  return a;
}

// Records with `record_args` after "record -c CONFIG -o OUT": linux.bpf,
// and an ftrace instance with sched_switch beside it, and checks BPF's
// switches against ftrace's (below). More than `min_switches_from_tasks`
// of ftrace's switches in the window must be out of a task.
void ExpectBpfSwitchesMatchFtrace(const std::vector<std::string>& record_args,
                                  int64_t min_switches_from_tasks) {
  const std::string cfg = TempPath("count.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 65536 }\n"
                        "buffers { size_kb: 65536 }\n"
                        "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
                        "  process: false incidents: false } } }\n"
                        "data_sources { config { name: \"linux.ftrace\" target_buffer: 1\n"
                        "  ftrace_config {\n"
                        "  ftrace_events: \"sched/sched_switch\"\n"
                        "  compact_sched { enabled: false } buffer_size_kb: 16384 } } }\n";
  const std::string out = TempPath("count.pftrace");
  std::vector<std::string> args = {"record", "-c", cfg, "-o", out};
  args.insert(args.end(), record_args.begin(), record_args.end());
  ASSERT_EQ(RunRingside(args), 0);
  const trace::Trace t = ReadTrace(out);
  std::map<uint32_t, std::vector<CpuSwitch>> bpf, kernel;  // By CPU.
  // The switches each source reports lost: before the buffers (a staging
  // ring's records of the type, runs of its programs the kernel skipped,
  // records of any type given up unread, ftrace's overruns, which hold
  // nothing but switches here) and after (a
  // chunk pool a loaded machine's owner thread did not empty in time, or the
  // buffer).
  std::map<std::string, uint64_t> lost;  // By data source.
  std::string loss_text;
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& l : p.trace_stats().ringside_staging_loss()) {
      if (l.data_source() == "linux.bpf" && l.kind() != "sched_switch" &&
          l.kind() != "bpf_missed_runs" && l.kind() != "ring_corruptions" &&
          l.kind() != "malformed_records") {
        continue;
      }
      lost[l.data_source()] += l.events_lost();
      absl::StrAppend(&loss_text, " ", l.data_source(), "/", l.kind(), "/cpu", l.cpu(), ":",
                      l.events_lost());
    }
    for (const auto& l : p.trace_stats().ringside_event_loss()) {
      if (l.kind() != "sched_switch") continue;
      lost[l.data_source()] += l.events_lost();
      absl::StrAppend(&loss_text, " ", l.data_source(), "/", l.kind(), "/", l.stage(), "/cpu",
                      l.cpu(), ":", l.events_lost());
    }
    const auto& b = p.ftrace_events();
    const auto& cs = b.compact_sched();
    uint64_t ts = 0;
    for (int i = 0; i < cs.switch_timestamp_size(); i++) {
      ts += cs.switch_timestamp(i);
      bpf[b.cpu()].push_back({ts, -1, cs.switch_next_pid(i)});
    }
    for (const trace::FtraceEvent& e : b.event()) {
      if (!e.has_sched_switch()) continue;
      kernel[b.cpu()].push_back(
          {e.timestamp(), e.sched_switch().prev_pid(), e.sched_switch().next_pid()});
    }
  }
  ASSERT_FALSE(bpf.empty());
  ASSERT_FALSE(kernel.empty());
  uint64_t lo = 0, hi = UINT64_MAX;
  for (auto* by_cpu : {&bpf, &kernel}) {
    uint64_t first = UINT64_MAX, last = 0;
    for (auto& [cpu, v] : *by_cpu) {
      std::sort(v.begin(), v.end(),
                [](const CpuSwitch& a, const CpuSwitch& b) { return a.ts < b.ts; });
      first = std::min(first, v.front().ts);
      last = std::max(last, v.back().ts);
    }
    lo = std::max(lo, first);
    hi = std::min(hi, last);
  }
  // The window both sources cover, 20 ms in from either end.
  lo += 20'000'000;
  hi -= 20'000'000;
  ASSERT_LT(lo, hi);
  SwitchAlignment all;
  int64_t theirs = 0, theirs_from_tasks = 0;
  for (const auto& [cpu, f] : kernel) {
    const SwitchAlignment a = AlignSwitches(bpf[cpu], f, lo, hi);
    all.matched += a.matched;
    all.only_ftrace += a.only_ftrace;
    all.only_bpf += a.only_bpf;
    all.only_bpf_unexplained += a.only_bpf_unexplained;
    all.bpf_repeated += a.bpf_repeated;
    all.widest_gap_ns = std::max(all.widest_gap_ns, a.widest_gap_ns);
    if (!a.unmatched.empty()) absl::StrAppend(&all.unmatched, "\n CPU ", cpu, ":", a.unmatched);
    if (!a.unexplained.empty()) {
      absl::StrAppend(&all.unexplained, "\n CPU ", cpu, ":", a.unexplained);
    }
    for (const CpuSwitch& s : f) {
      if (s.ts < lo || s.ts > hi) continue;
      theirs++;
      theirs_from_tasks += s.prev != 0;
    }
  }
  const int64_t lost_by_bpf = static_cast<int64_t>(lost["linux.bpf"]);
  const int64_t lost_by_ftrace = static_cast<int64_t>(lost["linux.ftrace"]);
  std::printf(
      "sched_switch in the window: ftrace %lld, in BPF's too %lld, BPF's own %lld (%lld not "
      "in a break of ftrace's chain); switches lost by BPF %lld, by ftrace %lld; the two "
      "records of one switch at most %.3f ms apart\n",
      static_cast<long long>(theirs), static_cast<long long>(all.matched),
      static_cast<long long>(all.only_bpf), static_cast<long long>(all.only_bpf_unexplained),
      static_cast<long long>(lost_by_bpf), static_cast<long long>(lost_by_ftrace),
      static_cast<double>(all.widest_gap_ns) / 1e6);
  EXPECT_GT(theirs_from_tasks, min_switches_from_tasks);
  EXPECT_LE(all.only_ftrace, lost_by_bpf)
      << all.only_ftrace << " of ftrace's " << theirs << " switches are not in BPF's record ("
      << all.matched << " are); losses reported:" << loss_text << all.unmatched;
  EXPECT_EQ(all.bpf_repeated, 0) << "switches BPF's record holds twice";
  // A page ftrace lost (counted: the kernel overwrote it before it was
  // read, as under AddressSanitizer beside a storm) can end on the task it
  // began with, so that ftrace's chain shows no break there: BPF's own
  // switches where the chain holds are explained as far as ftrace counted
  // losses (seen once: 3,137 such, with 4,518 lost by ftrace's count).
  EXPECT_LE(all.only_bpf_unexplained, lost_by_ftrace)
      << "BPF recorded " << all.only_bpf << " switches ftrace did not, " << all.only_bpf_unexplained
      << " of them where ftrace's chain shows no gap, and ftrace counted " << lost_by_ftrace
      << " lost:" << all.unexplained;
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// The sched_switch record of a recording against the kernel's own record of
// the tracepoint: the same recording also runs an ftrace instance with
// sched_switch (typed, not compact; into a buffer of its own, as an ftrace
// source writing into BPF's leaves BPF's events out). Over the window both
// cover, every switch ftrace has must be in BPF's record, on the same CPU
// and into the same task, but for the switches trace_stats says BPF lost;
// and every switch BPF has beyond that must sit where ftrace's own chain of
// switches shows that it missed one (AlignSwitches).
//
// Switch by switch, not by counting switches on either side: ftrace misses
// some without a count (out of idle, and out of some tasks), and a count
// with an allowance for those failed in CI (23 switches out of tokio-rt-
// worker threads, against an allowance of 21) where, switch by switch,
// each was exactly what ftrace's chain lacked.
TEST(RecordCommandTest, SchedSwitchesMatchTheKernelsWithinReportedLosses) {
  RINGSIDE_REQUIRE_TRACEFS();
  // 3,000 forks and waits, each switching the shell out.
  ExpectBpfSwitchesMatchFtrace(
      {"--", "/bin/sh", "-c",
       "i=0; while [ $i -lt 3000 ]; do sleep 0.0005 & wait; i=$((i+1)); done"},
      6000);
}

// The same at the highest switch rate this machine makes: a pipe ping-pong
// pair per CPU, every round trip two wakeups and two switches, beside
// whatever else runs (issue 52: under heavy outside load, 13,824 of
// ftrace's 1,486,978 switches were missing from BPF's record, with no loss
// reported). Here, alone, some 75,000 switches a second, each of ftrace's
// found in BPF's.
TEST(RecordCommandTest, SchedSwitchesMatchTheKernelsAtTheHighestSwitchRate) {
  RINGSIDE_REQUIRE_TRACEFS();
  ringside::testing::ScopedProcesses storm(ringside::testing::StartPipeStorm(2));
  ExpectBpfSwitchesMatchFtrace({"--duration", "4s"}, 50000);
}

// Outside load beside it, as issue 52 saw it: hackbench's 40 processes
// passing messages over pipes (rt-tests, as `make bench` uses it) in a
// process group of their own, ended with it. Measured beside two other
// builds: 81,099 to 112,456 switches in the window, each of ftrace's in
// BPF's record, no loss; beside `make flake-check`'s hackbench as well,
// 30,424 to 38,189 (the storm gets less of the CPUs), so the floor that
// says the storm ran is 10,000 here.
TEST(RecordCommandTest, SchedSwitchesMatchTheKernelsBesideOutsideLoad) {
  RINGSIDE_REQUIRE_TRACEFS();
  const pid_t load = fork();
  ASSERT_GE(load, 0);
  if (load == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    execlp("hackbench", "hackbench", "-p", "-g", "2", "-f", "10", "-l", "100000000", nullptr);
    _exit(127);
  }
  setpgid(load, load);  // Either side may run first.
  ringside::testing::ScopedProcesses storm(ringside::testing::StartPipeStorm(2));
  ExpectBpfSwitchesMatchFtrace({"--duration", "4s"}, 10000);
  kill(-load, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(load, &status, 0), load);
  // Still running when killed: it was load all along, not a failed start.
  EXPECT_TRUE(WIFSIGNALED(status)) << "hackbench exited with " << WEXITSTATUS(status);
  // Its workers, reparented as they die, are gone before the next test.
  for (int i = 0; i < 500 && kill(-load, 0) == 0; i++) usleep(10'000);
}

// Losses before the buffers reach trace_stats: a BPF ring too small for a
// storm and drained rarely drops records, counted per CPU and record type,
// and the bundle after a drop says so.
TEST(RecordCommandTest, BpfRingDropsAreInTraceStats) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("drops.pbtxt");
  // A buffer that does not wrap (the storm fills ~17 MiB here in 2 s): the
  // bundles marked lost may be few and early.
  std::ofstream(cfg) << "buffers { size_kb: 98304 }\n"
                        "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
                        "  ring_size_kb: 4 drain_period_ms: 1000 } } }\n";
  const std::string out = TempPath("drops.pftrace");
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  int code = -1;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "--duration", "2s"}, &code);
  ringside::testing::StopProcesses(storm);
  ASSERT_EQ(code, 0) << err;
  const trace::Trace t = ReadTrace(out);
  uint64_t switch_drops = 0, all_drops = 0;
  int lost_bundles = 0;
  for (const trace::TracePacket& p : t.packet()) {
    lost_bundles += p.ftrace_events().lost_events();
    for (const auto& b : p.trace_stats().buffer_stats()) EXPECT_EQ(b.bytes_overwritten(), 0u);
    for (const auto& l : p.trace_stats().ringside_staging_loss()) {
      EXPECT_EQ(l.data_source(), "linux.bpf");
      if (l.kind() == "sched_switch") switch_drops += l.events_lost();
      all_drops += l.events_lost();
    }
  }
  EXPECT_GT(switch_drops, 0u);
  EXPECT_GT(lost_bundles, 0);
  // The closing lines say so too, with the same count.
  EXPECT_NE(err.find(absl::StrCat("lost ", all_drops, " events in the staging rings")),
            std::string::npos)
      << err;
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// Written into a FIFO (as `-o >(gzip > t.gz)` is), the trace cannot be read
// again: the closing lines do not suggest `ringside inspect` of it, as they
// do of a regular file.
TEST(RecordCommandTest, TheClosingLinesSuggestInspectOnlyForAFileThatCanBeReadAgain) {
  const std::string fifo = TempPath("summary.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // A reader for the FIFO, as the shell's process substitution would be.
  const pid_t reader = fork();
  if (reader == 0) {
    const int fd = open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[4096];
    while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0) {
    }
    _exit(0);
  }
  ASSERT_GT(reader, 0);
  int code = -1;
  const std::string piped =
      testing::RunRingsideCaptureStderr({"record", "-t", "200ms", "-o", fifo}, &code);
  waitpid(reader, nullptr, 0);
  EXPECT_EQ(code, 0) << piped;
  EXPECT_TRUE(absl::StrContains(piped, "wrote " + fifo)) << piped;
  EXPECT_FALSE(absl::StrContains(piped, "ringside inspect")) << piped;
  unlink(fifo.c_str());

  const std::string file = TempPath("summary.pftrace");
  const std::string plain =
      testing::RunRingsideCaptureStderr({"record", "-t", "200ms", "-o", file}, &code);
  EXPECT_EQ(code, 0) << plain;
  EXPECT_TRUE(absl::StrContains(plain, "'ringside inspect " + file + "'")) << plain;
  unlink(file.c_str());
}

// A flight recorder's config given to record: its triggers are the agent's,
// and record says it ignores them rather than dropping them silently.
TEST(RecordCommandTest, AConfigsTriggersAreNamedAsIgnored) {
  const std::string cfg = TempPath("triggers.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 1024 }\n"
                        "trigger_config { trigger_mode: CLONE_SNAPSHOT\n"
                        "  triggers { name: \"crash\" incident { kinds: FATAL_SIGNAL } }\n"
                        "  triggers { name: \"deploy\" } }\n";
  const std::string out = TempPath("triggers.pftrace");
  int code = -1;
  const std::string err =
      testing::RunRingsideCaptureStderr({"record", "-c", cfg, "-t", "200ms", "-o", out}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_TRUE(absl::StrContains(err,
                                "trigger_config's 2 trigger(s) take snapshots in "
                                "'ringside agent' only; record ignores them"))
      << err;
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// Without -o, the trace goes where the config's output_path says.
TEST(RecordCommandTest, OutputPathComesFromTheConfigWithoutDashO) {
  const std::string out = TempPath("from_config.pftrace");
  const std::string cfg = TempPath("output.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 1024 }\noutput_path: \"" << out << "\"\n";
  ASSERT_EQ(RunRingside({"record", "-c", cfg, "--duration", "200ms"}), 0);
  EXPECT_GT(ReadTrace(out).packet_size(), 5);
  unlink(cfg.c_str());
  unlink(out.c_str());
}

TEST(RecordCommandTest, RecordsWhileACommandRunsAndPassesOnItsExitCode) {
  const std::string out = TempPath("cmd.pftrace");
  EXPECT_EQ(RunRingside({"record", "-o", out, "--", "/bin/sh", "-c", "exit 7"}), 7);
  EXPECT_GT(ReadTrace(out).packet_size(), 5);
  unlink(out.c_str());
}

// Ctrl-C (SIGINT) and SIGTERM in the middle of a recording: a complete file.
TEST(RecordCommandTest, SigintOrSigtermStopsEarlyAndStillWritesACompleteFile) {
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string out = TempPath("term.pftrace");
    pid_t pid = 0;
    RunRingside({"record", "--duration", "60s", "-o", out}, &pid, /*wait=*/false);
    sleep(1);
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    const trace::Trace t = ReadTrace(out);
    ASSERT_GT(t.packet_size(), 5);
    EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
    int stats = 0;
    for (const trace::TracePacket& p : t.packet()) stats += p.has_trace_stats();
    EXPECT_EQ(stats, 1);
    unlink(out.c_str());
  }
}

// Waits (up to a minute) until `path` exists: the command under record
// writes it once it is running and has set up its traps, so that a signal
// sent after it finds record's stop signals blocked and the trap in place
// (a fixed second was not always enough under load).
bool WaitForFile(const std::string& path) {
  struct stat st;
  for (int i = 0; i < 6000; i++) {
    if (stat(path.c_str(), &st) == 0) return true;
    usleep(10 * 1000);
  }
  return false;
}

// A stop signal while CMD runs goes on to CMD, and CMD's fate is the exit
// status, as a shell gives it: 128 + the signal that ended it (issue 39).
TEST(RecordCommandTest, AStopSignalGoesOnToTheCommandAndItsFateIsTheExitStatus) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string out = TempPath("cmd_signal.pftrace");
    const std::string running = TempPath("cmd_signal.running");
    unlink(running.c_str());
    pid_t pid = 0;
    RunRingside(
        {"record", "-o", out, "--", "/bin/sh", "-c", "touch " + running + "; exec sleep 30"}, &pid,
        /*wait=*/false);
    ASSERT_TRUE(WaitForFile(running));
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    const trace::Trace t = ReadTrace(out);
    ASSERT_GT(t.packet_size(), 5);
    EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
    unlink(out.c_str());
    unlink(running.c_str());
  }
}

// A command that ignores the stop signal does not hold the file back: a
// second one kills it, and the exit status says so.
TEST(RecordCommandTest, ASecondStopSignalKillsACommandThatIgnoresTheFirst) {
  const std::string out = TempPath("cmd_ignores.pftrace");
  const std::string running = TempPath("cmd_ignores.running");
  unlink(running.c_str());
  pid_t pid = 0;
  RunRingside({"record", "-o", out, "--", "/bin/sh", "-c",
               "trap '' INT; touch " + running + "; while :; do sleep 0.1; done"},
              &pid, /*wait=*/false);
  ASSERT_TRUE(WaitForFile(running));
  // Ctrl-C, then again every 200 ms until record ends (two signals sent
  // before it took the first would count as one): well before the 10 s after
  // which it kills the command by itself.
  const absl::Time start = absl::Now();
  int status = 0;
  pid_t ended = 0;
  while (ended == 0 && absl::Now() - start < absl::Seconds(60)) {
    ASSERT_EQ(kill(pid, SIGINT), 0);
    usleep(200 * 1000);
    ended = waitpid(pid, &status, WNOHANG);
  }
  ASSERT_EQ(ended, pid);
  EXPECT_LT(absl::Now() - start, absl::Seconds(9));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL);
  const trace::Trace t = ReadTrace(out);
  ASSERT_GT(t.packet_size(), 5);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
  unlink(out.c_str());
  unlink(running.c_str());
}

// A command that catches the stop signal and exits by itself: its status.
TEST(RecordCommandTest, ACommandThatHandlesTheStopSignalGivesItsOwnExitStatus) {
  const std::string out = TempPath("cmd_trap.pftrace");
  pid_t pid = 0;
  const std::string running = TempPath("cmd_trap.running");
  unlink(running.c_str());
  RunRingside({"record", "-o", out, "--", "/bin/sh", "-c",
               "trap 'exit 5' TERM; touch " + running + "; while :; do sleep 0.1; done"},
              &pid, /*wait=*/false);
  ASSERT_TRUE(WaitForFile(running));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5);
  unlink(out.c_str());
}

// The trace_config packet of the file at `path` (empty if it has none).
config::TraceConfig EmbeddedConfig(const std::string& path) {
  config::TraceConfig cfg;
  const trace::Trace t = ReadTrace(path);
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_trace_config()) cfg = p.trace_config();
  }
  return cfg;
}

// The trace_config packet says what was recorded: -t's duration, and none
// when CMD's end is what stops the recording (not the default's 10 s).
TEST(RecordCommandTest, TheEmbeddedConfigHasTheDurationThatWasRecorded) {
  const std::string out = TempPath("embedded.pftrace");
  ASSERT_EQ(RunRingside({"record", "-t", "700ms", "-o", out}), 0);
  config::TraceConfig cfg = EmbeddedConfig(out);
  EXPECT_EQ(cfg.duration_ms(), 700u);

  ASSERT_EQ(RunRingside({"record", "-o", out, "--", "/bin/true"}), 0);
  cfg = EmbeddedConfig(out);
  EXPECT_GT(cfg.buffers_size(), 0);  // The packet was there.
  EXPECT_FALSE(cfg.has_duration_ms()) << cfg.duration_ms();

  ASSERT_EQ(RunRingside({"record", "-t", "1500ms", "-o", out, "--", "/bin/true"}), 0);
  cfg = EmbeddedConfig(out);
  EXPECT_EQ(cfg.duration_ms(), 1500u);
  unlink(out.c_str());
}

// -z, as perf record's: every packet of the file is in a zstd compressed
// packet, the embedded config says so, and the closing lines give the
// ratio. --compress=deflate and the config's compression the same.
TEST(RecordCommandTest, DashZCompressesTheFileAndSaysHowMuch) {
  const std::string out = TempPath("compressed.pftrace");
  for (const auto& [flag, field] :
       {std::pair<std::string, int>{"-z", 133}, {"--compress=deflate", 50}}) {
    int code = -1;
    const std::string err =
        testing::RunRingsideCaptureStderr({"record", "-t", "500ms", flag, "-o", out}, &code);
    ASSERT_EQ(code, 0) << err;
    std::ifstream in(out, std::ios::binary);
    trace::Trace raw;
    ASSERT_TRUE(raw.ParseFromString(std::string((std::istreambuf_iterator<char>(in)), {})));
    ASSERT_GT(raw.packet_size(), 0);
    for (const trace::TracePacket& p : raw.packet()) {
      EXPECT_TRUE(field == 133 ? p.has_zstd_compressed_packets() : p.has_compressed_packets())
          << flag;
    }
    EXPECT_NE(err.find(field == 133 ? "ringside record: zstd: " : "ringside record: deflate: "),
              std::string::npos)
        << err;
    const config::TraceConfig cfg = EmbeddedConfig(out);
    EXPECT_EQ(field == 133 ? cfg.compression().has_zstd() : cfg.compression().has_deflate(), true)
        << cfg.DebugString();
    // Inflated, it is a whole recording.
    const trace::Trace t = testing::ReadTraceFile(out);
    EXPECT_GT(t.packet_size(), raw.packet_size());
  }
  unlink(out.c_str());
}

// A codec is given after '=' (perf's -z takes none): "-z zstd:9" would run
// zstd:9 as the command, so it is refused saying how to write it.
TEST(RecordCommandTest, ACodecAfterDashZAndASpaceIsRefusedSayingHowToWriteIt) {
  const std::string out = TempPath("z-space.pftrace");
  int code = -1;
  std::string err =
      testing::RunRingsideCaptureStderr({"record", "-o", out, "-z", "zstd:9", "true"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("-z takes no value: write --compress=zstd:9"), std::string::npos) << err;
  err = testing::RunRingsideCaptureStderr({"record", "--compress=gzip", "-o", out}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("unknown compression 'gzip'"), std::string::npos) << err;
  // Nothing after '=' (a variable that expanded to nothing) is not -z: it
  // used to write zstd without a word (issue 52).
  err =
      testing::RunRingsideCaptureStderr({"record", "-t", "200ms", "--compress=", "-o", out}, &code);
  EXPECT_EQ(code, 2) << err;
  EXPECT_NE(err.find("--compress= has nothing after '='"), std::string::npos) << err;
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0);
}

// An -e event this kernel does not have is refused before anything is
// recorded, naming the event and where to look (perf refuses it too).
TEST(RecordCommandTest, AnUnknownEventIsRefusedBeforeRecording) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("unknown_event.pftrace");
  for (const char* e_text :
       {"nosuch:event", "sched:nosuch_event", "nosuchgroup:*", "sched:nosuch_event/pid == 1/"}) {
    const std::string e = e_text;
    SCOPED_TRACE(e);
    unlink(out.c_str());
    int code = -1;
    const std::string err = testing::RunRingsideCaptureStderr(
        {"record", "-t", "200ms", "-e", "sched:sched_switch", "-e", e, "-o", out}, &code);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("-e " + e + ": this kernel has no event"), std::string::npos) << err;
    EXPECT_NE(err.find("'ringside list'"), std::string::npos) << err;
    struct stat st;
    EXPECT_NE(stat(out.c_str(), &st), 0) << "a trace was written";
  }
  // The events that exist, one by one and as a group, still record.
  EXPECT_EQ(
      RunRingside({"record", "-t", "200ms", "-e", "irq:*", "-e", "sched/sched_wakeup", "-o", out}),
      0);
  unlink(out.c_str());
}

// `ringside list` shows the BPF groups, which are not -e events: -e says
// where they are turned on instead.
TEST(RecordCommandTest, ABpfGroupGivenToDashEIsRefusedWithWhereItIsTurnedOn) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("bpf_event.pftrace");
  int code = -1;
  const std::string err =
      testing::RunRingsideCaptureStderr({"record", "-e", "bpf:sched", "-o", out}, &code);
  EXPECT_EQ(code, 2) << err;
  EXPECT_NE(err.find("linux.bpf"), std::string::npos) << err;
  EXPECT_NE(err.find("bpf_config"), std::string::npos) << err;
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0) << "a trace was written";
}

// Counts, in `path`, the switches BPF wrote (compact_sched) and the
// events of each kind (by FtraceEvent field number) ftrace wrote: those in
// the packet sequences that never carry BPF's compact_sched (each CPU's
// BPF writer has a sequence of its own, and switches on every CPU).
struct SwitchForms {
  int bpf_switches = 0;
  std::map<int, int> ftrace_events;
};
SwitchForms CountSwitchForms(const std::string& path) {
  SwitchForms f;
  const trace::Trace t = ReadTrace(path);
  std::set<uint32_t> bpf_sequences;
  for (const trace::TracePacket& p : t.packet()) {
    const int n = p.ftrace_events().compact_sched().switch_timestamp_size();
    f.bpf_switches += n;
    if (n > 0) bpf_sequences.insert(p.trusted_packet_sequence_id());
  }
  for (const trace::TracePacket& p : t.packet()) {
    if (bpf_sequences.contains(p.trusted_packet_sequence_id())) continue;
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      std::vector<const google::protobuf::FieldDescriptor*> fields;
      e.GetReflection()->ListFields(e, &fields);
      for (const auto* field : fields) {
        if (field->containing_oneof() != nullptr) f.ftrace_events[field->number()]++;
      }
    }
  }
  return f;
}

// -e of an event BPF records, alone or in a group glob, does not record it
// again with ftrace while BPF runs (issue 39); the glob's other events are
// recorded. Without compact_sched ftrace writes whole sched_switch events,
// and BPF writes compact_sched: the two are told apart by their form.
TEST(RecordCommandTest, AnEventBpfRecordsIsNotRecordedTwice) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("twice.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  bpf_fallback_events: \"sched/sched_switch\"\n"
                        "  compact_sched { enabled: false } } } }\n";
  const std::string out = TempPath("twice.pftrace");
  const int kSwitch = trace::FtraceEvent::kSchedSwitchFieldNumber;
  const int kWakeup = trace::FtraceEvent::kSchedWakeupFieldNumber;
  const int kWaking = trace::FtraceEvent::kSchedWakingFieldNumber;
  for (const char* e : {"sched:sched_switch", "sched:sched_waking", "sched:*"}) {
    SCOPED_TRACE(e);
    int code = -1;
    const std::string err = testing::RunRingsideCaptureStderr(
        {"record", "-c", cfg, "-t", "1s", "-e", e, "-o", out}, &code);
    ASSERT_EQ(code, 0) << err;
    const SwitchForms f = CountSwitchForms(out);
    if (f.bpf_switches == 0) GTEST_SKIP() << "BPF did not load: ftrace records the switches";
    EXPECT_EQ(f.ftrace_events.count(kSwitch), 0u) << "BPF's: " << f.bpf_switches;
    EXPECT_EQ(f.ftrace_events.count(kWaking), 0u);
    EXPECT_EQ(err.find("leaves out"), std::string::npos) << err;
    // The glob's events BPF does not record come from ftrace.
    if (std::string(e) == "sched:*") {
      EXPECT_GT(f.ftrace_events.count(kWakeup), 0u) << err;
    }
  }
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// A BPF group that is not running (here turned off; elsewhere one whose
// program a kernel's verifier refuses) has ftrace's bpf_fallback_events
// stand in for it, while the other groups still run with BPF.
TEST(RecordCommandTest, FallbackEventsStandInForTheBpfGroupThatIsNotRunning) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("no_sched.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\" bpf_config { sched: false } "
                        "} }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  bpf_fallback_events: \"sched/sched_switch\"\n"
                        "  bpf_fallback_events: \"sched/sched_process_fork\"\n"
                        "  compact_sched { enabled: false } } } }\n";
  const std::string out = TempPath("no_sched.pftrace");
  int code = -1;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "--", "/bin/sh", "-c", "sleep 0.2 & sleep 0.2 & wait"},
      &code);
  ASSERT_EQ(code, 0) << err;
  if (absl::StrContains(err, "linux.bpf disabled")) GTEST_SKIP() << "BPF did not load: " << err;
  EXPECT_TRUE(absl::StrContains(err, "recording sched/sched_switch with ftrace in place of BPF"))
      << err;
  int ftrace_switches = 0;
  std::map<int32_t, int> forks;  // Child pid -> fork events.
  const trace::Trace t = ReadTrace(out);
  for (const trace::TracePacket& p : t.packet()) {
    EXPECT_EQ(p.ftrace_events().compact_sched().switch_timestamp_size(), 0);
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      ftrace_switches += e.has_sched_switch();
      if (e.has_sched_process_fork()) forks[e.sched_process_fork().child_pid()]++;
    }
  }
  EXPECT_GT(ftrace_switches, 0);
  // Each fork once, from BPF's bpf/process: ftrace leaves its fallback out.
  EXPECT_GE(forks.size(), 2u);
  for (const auto& [pid, n] : forks) EXPECT_EQ(n, 1) << "the fork of " << pid;
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// A config that lists in ftrace_events an event linux.bpf records (without
// bpf_fallback_events) records it once, from BPF, and says that ftrace
// leaves it out and why.
TEST(RecordCommandTest, AConfigsFtraceEventThatBpfRecordsIsLeftOutSayingWhy) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = TempPath("both.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  ftrace_events: \"sched/sched_switch\"\n"
                        "  ftrace_events: \"sched/sched_wakeup\"\n"
                        "  compact_sched { enabled: false } } } }\n";
  const std::string out = TempPath("both.pftrace");
  int code = -1;
  const std::string err =
      testing::RunRingsideCaptureStderr({"record", "-c", cfg, "-t", "1s", "-o", out}, &code);
  ASSERT_EQ(code, 0) << err;
  const SwitchForms f = CountSwitchForms(out);
  if (f.bpf_switches == 0) GTEST_SKIP() << "BPF did not load: ftrace records the switches";
  EXPECT_EQ(f.ftrace_events.count(trace::FtraceEvent::kSchedSwitchFieldNumber), 0u);
  EXPECT_GT(f.ftrace_events.count(trace::FtraceEvent::kSchedWakeupFieldNumber), 0u);
  EXPECT_NE(err.find("linux.ftrace: leaves out sched/sched_switch: linux.bpf records every one"),
            std::string::npos)
      << err;
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// A filter on an event BPF records would narrow nothing: it is refused
// with why, before anything is recorded.
TEST(RecordCommandTest, AFilterOnAnEventBpfRecordsIsRefusedWithWhy) {
  const std::string out = TempPath("bpf_filter.pftrace");
  int code = -1;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-e", "sched:sched_switch/prev_prio < 100/", "-o", out}, &code);
  EXPECT_EQ(code, 2) << err;
  EXPECT_NE(err.find("BPF records every sched:sched_switch"), std::string::npos) << err;
  EXPECT_NE(err.find("a filter would narrow nothing"), std::string::npos) << err;
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0) << "a trace was written";
  // With BPF's sched group off, ftrace records the switches and applies it.
  const std::string cfg = TempPath("bpf_sched_off.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 4096 }\n"
                        "data_sources { config { name: \"linux.bpf\" bpf_config { sched: false } "
                        "} }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                        "  bpf_fallback_events: \"sched/sched_switch\" } } }\n";
  EXPECT_EQ(RunRingside({"record", "-c", cfg, "-t", "200ms", "-e",
                         "sched:sched_switch/prev_prio < 100/", "-o", out}),
            0);
  unlink(cfg.c_str());
  unlink(out.c_str());
}

// Without privilege neither BPF nor tracefs can be used: each is named with
// what it needs, and the recording still holds what /proc tells anyone.
TEST(RecordCommandTest, WithoutPrivilegeSaysWhatIsMissingAndRecordsProc) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run ringside as user nobody";
  const std::string out = TempPath("nobody.pftrace");
  int code = -1;
  const std::string err =
      testing::RunRingsideCaptureStderr({"record", "--duration", "300ms", "-o", out}, &code, 65534);
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("linux.bpf disabled"), std::string::npos) << err;
  EXPECT_NE(err.find("CAP_BPF"), std::string::npos) << err;
  EXPECT_NE(err.find("linux.ftrace disabled"), std::string::npos) << err;
  EXPECT_NE(err.find("from /proc only"), std::string::npos) << err;
  const trace::Trace t = ReadTrace(out);
  bool found_us = false, stats = false;
  for (const trace::TracePacket& p : t.packet()) {
    for (const auto& pr : p.process_tree().processes()) found_us |= pr.pid() == getpid();
    stats |= p.has_trace_stats();
  }
  EXPECT_TRUE(found_us) << "this test's process is not in the /proc scan";
  EXPECT_TRUE(stats);
  unlink(out.c_str());
}

// A full disk under a streaming file: the file stays a valid trace (a short
// write is cut back to the last whole packet), ringside says so at once,
// keeps recording into its buffers, and writes again once there is room,
// starting with what it had read when the disk filled.
//
// It records its own cgroup only: the freed 4 MiB must hold the rest of the
// recording, which the whole machine's scheduling, beside another test's
// pipe storm, filled again before the end.
TEST(RecordCommandTest, StreamingThroughAFullDiskKeepsTheFileValidAndCatchesUp) {
  RINGSIDE_REQUIRE_TRACEFS();
  testing::ScratchCgroup cgroup("fulldisk");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  const std::string procs = cgroup.dir() + "/cgroup.procs";
  const std::string cfg = TempPath("full.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\" bpf_config {\n"
                        "  filter_cgroup_path: \""
                     << cgroup.path()
                     << "\" } } }\n"
                        "write_into_file: true\nfile_write_period_ms: 100\n"
                        "flush_period_ms: 100\n";
  const std::string dir = TempPath("fulldisk");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << std::strerror(errno);
  const std::string copy = TempPath("full.pftrace"), err_copy = TempPath("full.stderr");
  // A child with a mount namespace of its own mounts a 4 MiB tmpfs on `dir`
  // (nobody else sees it; it goes with the child) and fills all of it but
  // 48 KiB; the recorded command's 500 execs fill the rest, then it frees it.
  const pid_t pid = fork();
  if (pid == 0) {
    std::ofstream(procs) << "0";  // Into the cgroup, with all it starts.
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("ringside-test", dir.c_str(), "tmpfs", 0, "size=4m") != 0) {
      _exit(100);
    }
    {
      std::ofstream filler(dir + "/filler", std::ios::binary);
      const std::string block(4096, 'x');
      for (int i = 0; i < 4 * 256 - 12; i++) filler << block;
    }
    int code = -1;
    const std::string out = dir + "/trace.pftrace";
    const std::string err = testing::RunRingsideCaptureStderr(
        {"record", "-c", cfg, "-o", out, "--", "/bin/sh", "-c",
         "i=0; while [ $i -lt 500 ]; do /bin/true; i=$((i+1)); done; sleep 0.5; rm " + dir +
             "/filler; /bin/true; sleep 1"},
        &code);
    std::ofstream(err_copy) << err;
    std::ifstream in(out, std::ios::binary);
    std::ofstream(copy, std::ios::binary) << in.rdbuf();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream err_in(err_copy);
  const std::string err((std::istreambuf_iterator<char>(err_in)), {});
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 100) << "cannot mount a tmpfs in a mount namespace of our own";
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(err.find("again; nothing read from the buffers was lost"), std::string::npos) << err;
  // Whole: every packet parses, and the end of the recording is there.
  const trace::Trace t = ReadTrace(copy);
  ASSERT_GT(t.packet_size(), 0);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
  bool stats = false, rm = false;
  for (const trace::TracePacket& p : t.packet()) {
    stats |= p.has_trace_stats();
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      rm |= absl::EndsWith(e.sched_process_exec().filename(), "/rm");  // While the disk was full.
    }
  }
  EXPECT_TRUE(stats);
  EXPECT_TRUE(rm) << "the exec of rm, recorded while the disk was full, is not in the file";
  rmdir(dir.c_str());
  unlink(cfg.c_str());
  unlink(copy.c_str());
  unlink(err_copy.c_str());
}

// A program's name is bytes, not always UTF-8: the trace keeps them as they
// are (as Perfetto's do) and nothing complains about them on stderr.
TEST(RecordCommandTest, NamesThatAreNotUtf8AreRecordedAsTheyAre) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string dir = TempPath("latin1");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << std::strerror(errno);
  const std::string name = "caf\xe9";  // Latin-1; its comm is the same 4 bytes.
  const std::string program = dir + "/" + name;
  ASSERT_EQ(symlink("/bin/true", program.c_str()), 0) << std::strerror(errno);
  const std::string out = TempPath("latin1.pftrace");
  int code = -1;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-o", out, "--", "/bin/sh", "-c", program + "; " + program}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(err.find("libprotobuf"), std::string::npos) << err;
  const trace::Trace t = ReadTrace(out);
  int execs = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      execs += e.sched_process_exec().filename() == program;
    }
  }
  EXPECT_EQ(execs, 2);
  unlink(program.c_str());
  rmdir(dir.c_str());
  unlink(out.c_str());
}

// An output path that cannot be written fails at once, not after the whole
// recording has been made and held in memory.
TEST(RecordCommandTest, AnUnwritableOutputPathFailsBeforeRecording) {
  const std::string missing_dir = TempPath("no-such-dir") + "/out.pftrace";
  const std::string a_directory = ::testing::TempDir();
  for (const std::string& out : {missing_dir, a_directory}) {
    int code = -1;
    const absl::Time start = absl::Now();
    const std::string err =
        testing::RunRingsideCaptureStderr({"record", "--duration", "60s", "-o", out}, &code);
    EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << out;
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(err.find("cannot write " + out), std::string::npos) << err;
  }
}

TEST(RecordCommandTest, BadConfigExitsTwoAndWritesNothing) {
  const std::string cfg = TempPath("bad.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 1024 }\nnot_a_field: 1\n";
  const std::string out = TempPath("bad.pftrace");
  EXPECT_EQ(RunRingside({"record", "-c", cfg, "-o", out}), 2);
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0);
  unlink(cfg.c_str());
}

}  // namespace
}  // namespace ringside::agent
