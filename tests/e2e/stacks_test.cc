// Issue 54's proof: `ringside record` of a program built with frame
// pointers (tests/tools/stack_workload.c), opened in Perfetto's
// trace_processor. A thread that blocks in a read of a pipe shows where it
// waited, its own function and the kernel's pipe_read, weighted by the time
// it waited; so does one that sleeps; one that spins is sampled in its
// loop. The same from an agent's crash snapshot of that program.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

using testing::Query;
using testing::QueryInt;
using testing::RunProgramCapture;
using testing::TempPath;

// "key value" lines of the workload's result file.
std::map<std::string, int64_t> ReadResult(const std::string& path) {
  std::map<std::string, int64_t> out;
  std::ifstream in(path);
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) out[key] = value;
  return out;
}

struct Weighed {
  int64_t with_frames = 0;  // Weight of the thread's samples holding both frames.
  int64_t all = 0;          // Of all its samples.
};

// The weight in `counter` ("blocked_time", "cpu_time") of `tid`'s samples,
// and of those whose callstack holds both `user_fn` and one of
// `kernel_fns` (a function some kernels renamed: 6.14 reads anonymous pipes
// in anon_pipe_read); no `kernel_fns`: `user_fn` alone.
Weighed WeightOf(const std::string& tp, const std::string& trace, const std::string& counter,
                 int64_t tid, const std::string& user_fn,
                 const std::vector<std::string>& kernel_fns) {
  const std::string has_kernel =
      kernel_fns.empty()
          ? std::string("1")
          : absl::StrCat("max(f.name in ('", absl::StrJoin(kernel_fns, "', '"), "'))");
  const std::string sql = absl::StrCat(
      "with recursive chain(sample_id, callsite_id) as ("
      " select s.id, s.callsite_id from stack_sample s"
      " union all"
      " select chain.sample_id, c.parent_id from chain join stack_profile_callsite c"
      " on c.id = chain.callsite_id where c.parent_id is not null),"
      " per_sample as ("
      " select s.id as id, cast(v.value as int) as w,"
      " max(f.name = '",
      user_fn, "') as has_user, ", has_kernel,
      " as has_kernel"
      " from stack_sample s"
      " join stack_sample_task_context tc on tc.id = s.task_context_id"
      " join thread t on t.utid = tc.utid"
      " join stack_sample_counter v on v.stack_sample_id = s.id"
      " join stack_sample_counter_track k on k.id = v.track_id and k.name = '",
      counter,
      "'"
      " join chain on chain.sample_id = s.id"
      " join stack_profile_callsite c on c.id = chain.callsite_id"
      " join stack_profile_frame f on f.id = c.frame_id"
      " where t.tid = ",
      tid,
      " group by s.id)"
      " select coalesce(sum(case when has_user and has_kernel then w else 0 end), 0),"
      " coalesce(sum(w), 0) from per_sample");
  const std::vector<std::vector<std::string>> rows = Query(tp, trace, sql);
  Weighed out;
  if (rows.size() != 1 || rows[0].size() != 2 || !absl::SimpleAtoi(rows[0][0], &out.with_frames) ||
      !absl::SimpleAtoi(rows[0][1], &out.all)) {
    ADD_FAILURE() << "unexpected answer to " << sql;
  }
  return out;
}

// trace_processor imports `trace` with no error and no data loss.
void ExpectImportsCleanly(const std::string& tp, const std::string& trace) {
  EXPECT_EQ(QueryInt(tp, trace,
                     "select count(*) from stats where severity in ('error', 'data_loss') "
                     "and value > 0"),
            0)
      << "trace_processor reports errors in " << trace;
}

// What the workload's result `r` says its threads did, in `trace`'s
// stacks: the proof.
void ExpectWhereTheyWaitedAndRan(const std::string& tp, const std::string& trace,
                                 const std::map<std::string, int64_t>& r) {
  EXPECT_EQ(QueryInt(tp, trace,
                     "select count(*) from stack_sample_session where source = "
                     "'linux.bpf'"),
            1);

  // The reader waited about 20 ms a read for 2 s: its samples hold its own
  // function and the kernel's, and weigh what it measured around its reads.
  const Weighed reader = WeightOf(tp, trace, "blocked_time", r.at("reader_tid"),
                                  "wait_for_pipe_data", {"pipe_read", "anon_pipe_read"});
  const double read_ns = static_cast<double>(r.at("read_ns"));
  EXPECT_NEAR(static_cast<double>(reader.with_frames), read_ns, read_ns * 0.10)
      << "the reader's blocked stacks in wait_for_pipe_data and pipe_read (of " << reader.all
      << " ns in all its blocked stacks)";

  const Weighed napper = WeightOf(tp, trace, "blocked_time", r.at("napper_tid"),
                                  "nap_between_polls", {"do_nanosleep"});
  const double nap_ns = static_cast<double>(r.at("nap_ns"));
  EXPECT_NEAR(static_cast<double>(napper.with_frames), nap_ns, nap_ns * 0.10)
      << "the napper's blocked stacks in nap_between_polls and do_nanosleep (of " << napper.all
      << " ns in all its blocked stacks)";

  // The spinner ran 2 s on a CPU of its own, more or less: at 49 Hz, most
  // of its samples (80%, the issue asks) are in its loop.
  const Weighed spinner =
      WeightOf(tp, trace, "cpu_time", r.at("spinner_tid"), "burn_cpu_in_hot_loop", {});
  EXPECT_GT(spinner.all, 0) << "no CPU sample of the spinner";
  EXPECT_GE(static_cast<double>(spinner.with_frames), 0.8 * static_cast<double>(spinner.all))
      << "of the spinner's sampled CPU time, in burn_cpu_in_hot_loop";
  std::printf(
      "%s: reader %.1f of %.1f ms measured, napper %.1f of %.1f ms, spinner %.1f of %.1f ms "
      "sampled in its loop\n",
      trace.c_str(), static_cast<double>(reader.with_frames) / 1e6, read_ns / 1e6,
      static_cast<double>(napper.with_frames) / 1e6, nap_ns / 1e6,
      static_cast<double>(spinner.with_frames) / 1e6, static_cast<double>(spinner.all) / 1e6);
}

TEST(StacksTest, BlockedThreadsShowWhereTheyWaitedAndASpinnerWhereItRan) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string workload = absl::StrCat(ringside::testing::BuildDir(), "/stack_workload");
  ASSERT_EQ(access(workload.c_str(), X_OK), 0) << workload << " (make builds it)";
  const std::string cfg = TempPath("stacks.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\"\n"
                        "  bpf_config { stacks {} } } }\n";
  const std::string out = TempPath("stacks.pftrace");
  const std::string result = TempPath("stacks.result");
  unlink(result.c_str());
  int code = 0;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "--", workload, "2", result}, &code);
  if (absl::StrContains(err, "linux.bpf disabled")) GTEST_SKIP() << "BPF did not load: " << err;
  ASSERT_EQ(code, 0) << err;
  const std::map<std::string, int64_t> r = ReadResult(result);
  ASSERT_EQ(r.size(), 5u) << "the workload's result " << result;
  ExpectImportsCleanly(tp, out);
  ExpectWhereTheyWaitedAndRan(tp, out, r);
  unlink(cfg.c_str());
  unlink(out.c_str());
  unlink(result.c_str());
}

// Runs `program` with `args` in the cgroup of `cgroup_procs` (a shell that
// moves itself there, then execs it), so that a recording filtered to that
// cgroup holds it whole; a machine loaded by others does not crowd it out.
// Its exit status, or -signal.
int RunInCgroup(const std::string& cgroup_procs, const std::string& program,
                const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"-c", "echo $$ > \"$0\" && exec \"$@\"", cgroup_procs, program};
  argv.insert(argv.end(), args.begin(), args.end());
  int code = -1;
  RunProgramCapture("/bin/sh", argv, &code);
  return code;
}

// The linux.bpf data source with stacks, recording only `cgroup_path`.
std::string StacksOfCgroup(const std::string& cgroup_path) {
  return absl::StrCat(
      "data_sources { config { name: \"linux.bpf\"\n"
      "  bpf_config { filter_cgroup_path: \"",
      cgroup_path, "\" stacks {} } } }\n");
}

bool CanLoadBpf(std::string* why) {
  struct stat st;
  if (geteuid() != 0) {
    *why = "ringside agent's BPF programs need root";
  } else if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    *why = "the agent's BPF programs need the kernel's BTF (/sys/kernel/btf/vmlinux)";
  }
  return why->empty();
}

// A flight recorder (`ringside agent`, a ring and a crash trigger) while
// the workload runs 2 s, then dies of a SIGSEGV: the snapshot the crash
// fires holds the same stacks, weighed the same, as a recording to a file.
TEST(StacksTest, AnAgentsCrashSnapshotOfTheWorkloadShowsTheSame) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  std::string why;
  if (!CanLoadBpf(&why)) GTEST_SKIP() << why;
  const std::string workload = absl::StrCat(ringside::testing::BuildDir(), "/stack_workload");
  ASSERT_EQ(access(workload.c_str(), X_OK), 0) << workload << " (make builds it)";
  testing::ScratchCgroup cgroup("stacks");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  testing::ScratchDir dir;
  ASSERT_EQ(mkdir(dir.Join("run").c_str(), 0755), 0);
  const std::string cfg = dir.Join("agent.pbtxt");
  ASSERT_TRUE(testing::WriteTextFile(
      cfg, absl::StrCat("buffers { size_kb: 16384 fill_policy: RING_BUFFER }\n",
                        StacksOfCgroup(cgroup.path()),
                        "trigger_config { trigger_mode: CLONE_SNAPSHOT triggers {\n"
                        "  name: \"crash\" stop_delay_ms: 500\n"
                        "  incident { kinds: FATAL_SIGNAL comms: \"stack_workload\" } } }\n")));
  const std::string snaps = dir.Join("snaps");
  testing::FakeNotifySocket notify(dir.Join("notify.sock"));
  testing::AgentProcess agent({"-c", cfg, "--socket", dir.Join("control.sock"), "--run-dir",
                               dir.Join("run"), "--output-dir", snaps},
                              dir.Join("agent.log"), notify.path());
  const absl::Status ready = agent.WaitReady(&notify, absl::Seconds(60));
  ASSERT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent.Log();

  const std::string result = dir.Join("stacks.result");
  ASSERT_EQ(RunInCgroup(cgroup.dir() + "/cgroup.procs", workload, {"2", result, "crash"}), -SIGSEGV)
      << "the workload did not crash";
  std::set<std::string> files;
  for (int i = 0; i < 300 && files.empty(); i++) {
    absl::SleepFor(absl::Milliseconds(100));
    files.clear();
    // A final name: not the temporary one it is written under.
    for (const std::string& name : testing::ListTraces(snaps)) {
      if (name[0] != '.' && absl::EndsWith(name, ".pftrace")) files.insert(name);
    }
  }
  ASSERT_EQ(files.size(), 1u) << absl::StrJoin(files, ", ") << "; the agent said:\n" << agent.Log();
  const std::string snapshot = snaps + "/" + *files.begin();
  EXPECT_TRUE(absl::EndsWith(snapshot, "-crash.pftrace")) << snapshot;
  const std::map<std::string, int64_t> r = ReadResult(result);
  ASSERT_EQ(r.size(), 5u) << "the workload's result " << result;
  ExpectImportsCleanly(tp, snapshot);
  ExpectWhereTheyWaitedAndRan(tp, snapshot, r);
  EXPECT_FALSE(absl::StrContains(agent.Log(), "stacks need")) << agent.Log();
  ASSERT_TRUE(agent.Signal(SIGTERM));
  const std::optional<int> exit = agent.WaitExit(absl::Seconds(60));
  EXPECT_TRUE(exit.has_value() && WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << agent.Log();
}

}  // namespace
}  // namespace ringside::agent
