// Issue 54's proof: `ringside record` of a program built with frame
// pointers (tests/tools/stack_workload.c), opened in Perfetto's
// trace_processor. A thread that blocks in a read of a pipe shows where it
// waited, its own function and the kernel's pipe_read, weighted by the time
// it waited; so does one that sleeps; one that spins is sampled in its
// loop. The same from an agent's crash snapshot of that program; and a
// stripped copy of it keeps build id and pc, unnamed, for a symbolizer to
// name later.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scoped_env.h"
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

  // The dozer's 100 us sleeps are shorter than the sampling period: with
  // kprobes, a share of them is taken, weighing the period; without (at
  // the switch), every one. Either way its weight is its time off the CPU,
  // as the same file's switches give it (thread_state), within 10%.
  const Weighed dozer = WeightOf(tp, trace, "blocked_time", r.at("dozer_tid"), "doze_briefly",
                                 {"do_nanosleep", "hrtimer_nanosleep"});
  const int64_t dozer_off_cpu = QueryInt(
      tp, trace,
      absl::StrCat("select coalesce(sum(s.dur), 0) from thread_state s join thread t using (utid) "
                   "where t.tid = ",
                   r.at("dozer_tid"), " and s.state != 'Running' and s.dur > 0"));
  EXPECT_GT(dozer_off_cpu, 0);
  EXPECT_NEAR(static_cast<double>(dozer.with_frames), static_cast<double>(dozer_off_cpu),
              static_cast<double>(dozer_off_cpu) * 0.10)
      << "the dozer's blocked stacks in doze_briefly and do_nanosleep (of " << dozer.all
      << " ns in all its blocked stacks), against its time off the CPU";

  // The spinner ran 2 s on a CPU of its own, more or less: at 49 Hz, most
  // of its samples (80%, the issue asks) are in its loop.
  const Weighed spinner =
      WeightOf(tp, trace, "cpu_time", r.at("spinner_tid"), "burn_cpu_in_hot_loop", {});
  EXPECT_GT(spinner.all, 0) << "no CPU sample of the spinner";
  EXPECT_GE(static_cast<double>(spinner.with_frames), 0.8 * static_cast<double>(spinner.all))
      << "of the spinner's sampled CPU time, in burn_cpu_in_hot_loop";
  std::printf(
      "%s: reader %.1f of %.1f ms measured, napper %.1f of %.1f ms, dozer %.1f of %.1f ms off "
      "CPU, spinner %.1f of %.1f ms sampled in its loop\n",
      trace.c_str(), static_cast<double>(reader.with_frames) / 1e6, read_ns / 1e6,
      static_cast<double>(napper.with_frames) / 1e6, nap_ns / 1e6,
      static_cast<double>(dozer.with_frames) / 1e6, static_cast<double>(dozer_off_cpu) / 1e6,
      static_cast<double>(spinner.with_frames) / 1e6, static_cast<double>(spinner.all) / 1e6);
}

TEST(StacksTest, BlockedThreadsShowWhereTheyWaitedAndASpinnerWhereItRan) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string workload = absl::StrCat(ringside::testing::BuildDir(), "/stack_workload");
  ASSERT_EQ(access(workload.c_str(), X_OK), 0) << workload << " (make builds it)";
  const std::string cfg = TempPath("stacks.pbtxt");
  // `blocked: true`: blocked stacks on a kernel without kprobes too.
  std::ofstream(cfg) << "buffers { size_kb: 16384 }\n"
                        "data_sources { config { name: \"linux.bpf\"\n"
                        "  bpf_config { stacks { blocked: true } } } }\n";
  const std::string out = TempPath("stacks.pftrace");
  const std::string result = TempPath("stacks.result");
  unlink(result.c_str());
  int code = 0;
  const std::string err = testing::RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "--", workload, "2", result}, &code);
  if (absl::StrContains(err, "linux.bpf disabled")) GTEST_SKIP() << "BPF did not load: " << err;
  ASSERT_EQ(code, 0) << err;
  const std::map<std::string, int64_t> r = ReadResult(result);
  ASSERT_EQ(r.size(), 7u) << "the workload's result " << result;
  ExpectImportsCleanly(tp, out);
  ExpectWhereTheyWaitedAndRan(tp, out, r);
  unlink(cfg.c_str());
  unlink(out.c_str());
  unlink(result.c_str());
}

// The command line of `program` with `args` run in the cgroup of
// `cgroup_procs` (a shell that moves itself there, then execs it), so that
// a recording filtered to that cgroup holds it whole: a machine loaded by
// others does not crowd it out of the ring.
std::vector<std::string> InCgroup(const std::string& cgroup_procs, const std::string& program,
                                  const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroup_procs,
                                   program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The linux.bpf data source with stacks, recording only `cgroup_path`.
std::string StacksOfCgroup(const std::string& cgroup_path) {
  return absl::StrCat(
      "data_sources { config { name: \"linux.bpf\"\n"
      "  bpf_config { filter_cgroup_path: \"",
      cgroup_path, "\" stacks { blocked: true } } } }\n");
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
  const std::vector<std::string> run =
      InCgroup(cgroup.dir() + "/cgroup.procs", workload, {"2", result, "crash"});
  int code = 0;
  RunProgramCapture(run[0], std::vector<std::string>(run.begin() + 1, run.end()), &code);
  ASSERT_EQ(code, -SIGSEGV) << "the workload did not crash";
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
  ASSERT_EQ(r.size(), 7u) << "the workload's result " << result;
  ExpectImportsCleanly(tp, snapshot);
  ExpectWhereTheyWaitedAndRan(tp, snapshot, r);
  EXPECT_FALSE(absl::StrContains(agent.Log(), "stacks need")) << agent.Log();
  ASSERT_TRUE(agent.Signal(SIGTERM));
  const std::optional<int> exit = agent.WaitExit(absl::Seconds(60));
  EXPECT_TRUE(exit.has_value() && WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << agent.Log();
}

// What `tool` (found on PATH) prints with `args`; empty if it failed.
std::string RunTool(const std::string& tool, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"-c", "exec \"$0\" \"$@\"", tool};
  argv.insert(argv.end(), args.begin(), args.end());
  int code = -1;
  const std::string out = RunProgramCapture("/bin/sh", argv, &code);
  return code == 0 ? out : "";
}

// The build id `readelf -n` prints for `path` (hex), or "".
std::string ReadelfBuildId(const std::string& path) {
  const std::string out = RunTool("readelf", {"-n", path});
  const size_t at = out.find("Build ID: ");
  if (at == std::string::npos) return "";
  std::istringstream rest(out.substr(at + 10));
  std::string id;
  rest >> id;
  return id;
}

// The functions `path`'s .dynsym defines (readelf), versions cut.
std::set<std::string> DynsymFunctions(const std::string& path) {
  std::set<std::string> out;
  for (absl::string_view line :
       absl::StrSplit(RunTool("readelf", {"--dyn-syms", "-W", path}), '\n')) {
    // Num: Value Size Type Bind Vis Ndx Name
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 8 || f[3] != "FUNC" || f[6] == "UND") continue;
    out.insert(std::string(f[7].substr(0, f[7].find('@'))));
  }
  return out;
}

// The function names (inlined ones too) llvm-symbolizer gives each of
// `rel_pcs` in `binary`, as Perfetto's symbolizer asks it (an ELF virtual
// address).
std::map<int64_t, std::set<std::string>> LlvmSymbolize(const std::string& binary,
                                                       const std::set<int64_t>& rel_pcs) {
  std::vector<std::string> args = {"--output-style=JSON", "--obj=" + binary};
  for (int64_t pc : rel_pcs) args.push_back(absl::StrCat("0x", absl::Hex(pc)));
  std::map<int64_t, std::set<std::string>> out;
  // One JSON object per address: all in an array (addresses given on the
  // command line), or one a line (read from stdin).
  for (absl::string_view line :
       absl::StrSplit(RunTool("llvm-symbolizer", args), '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) j = nlohmann::json::array({j});
    for (const nlohmann::json& a : j) {
      int64_t pc = 0;
      if (!a.is_object() || !a["Address"].is_string() ||
          !absl::SimpleHexAtoi(absl::StripPrefix(a["Address"].get<std::string>(), "0x"), &pc)) {
        continue;
      }
      for (const nlohmann::json& s : a["Symbol"]) {
        if (s["FunctionName"].is_string()) out[pc].insert(s["FunctionName"].get<std::string>());
      }
    }
  }
  return out;
}

// The frames of `tid`'s stacks in the mapping of `binary`: rel_pc, the
// name the file gives it (empty: none), and the mapping's build id; with
// `symbols`, each name of its symbols instead (those of an offline
// symbolizer: stack_profile_symbol), one row each.
std::vector<std::vector<std::string>> FramesIn(const std::string& tp, const std::string& trace,
                                               int64_t tid, const std::string& binary,
                                               bool symbols) {
  return Query(
      tp, trace,
      absl::StrCat(
          "with recursive chain(callsite_id) as ("
          " select s.callsite_id from stack_sample s"
          " join stack_sample_task_context tc on tc.id = s.task_context_id"
          " join thread t on t.utid = tc.utid where t.tid = ",
          tid,
          " union"
          " select c.parent_id from chain join stack_profile_callsite c"
          " on c.id = chain.callsite_id where c.parent_id is not null)"
          " select distinct f.rel_pc, ",
          symbols ? "ifnull(sym.name, '')" : "ifnull(f.name, '')",
          ", m.build_id from chain"
          " join stack_profile_callsite c on c.id = chain.callsite_id"
          " join stack_profile_frame f on f.id = c.frame_id"
          " join stack_profile_mapping m on m.id = f.mapping",
          symbols ? " left join stack_profile_symbol sym on sym.symbol_set_id = f.symbol_set_id"
                  : "",
          " where m.name = '", binary, "'"));
}

// Perfetto's own offline symbolizer (trace_processor with
// PERFETTO_BINARY_PATH, which finds `unstripped` by build id) on `trace`:
// the function names (inlined ones too) of `tid`'s frames in `binary`'s
// mapping, by rel_pc.
std::map<int64_t, std::set<std::string>> PerfettoSymbolize(const std::string& tp,
                                                           const std::string& trace, int64_t tid,
                                                           const std::string& binary,
                                                           const std::string& unstripped) {
  testing::ScratchDir symbols;
  std::error_code error;
  std::filesystem::copy_file(unstripped, symbols.Join("stack_workload"), error);
  EXPECT_FALSE(error) << "copying " << unstripped << ": " << error.message();
  testing::ScopedEnv env({"PERFETTO_BINARY_PATH"});
  env.Set("PERFETTO_BINARY_PATH", symbols.path());
  std::map<int64_t, std::set<std::string>> out;
  for (const std::vector<std::string>& row : FramesIn(tp, trace, tid, binary, /*symbols=*/true)) {
    int64_t pc = 0;
    EXPECT_TRUE(row.size() == 3u && absl::SimpleAtoi(row[0], &pc)) << absl::StrJoin(row, ",");
    if (row.size() == 3u && !row[1].empty()) out[pc].insert(row[1]);
  }
  return out;
}

// A stripped copy of the workload, recorded: its frames have no name (what
// the binary's .dynsym exports at most: none of its functions), but keep
// the build id and rel_pc from which an offline symbolizer given the
// unstripped file names them, llvm-symbolizer as Perfetto's own
// (trace_processor with PERFETTO_BINARY_PATH) does, rightly.
TEST(StacksTest, AStrippedBinarysFramesKeepBuildIdAndPcUnnamedForASymbolizerToNameLater) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  std::string why;
  if (!CanLoadBpf(&why)) GTEST_SKIP() << why;
  const std::string unstripped = absl::StrCat(ringside::testing::BuildDir(), "/stack_workload");
  const std::string stripped = unstripped + "_stripped";
  ASSERT_EQ(access(stripped.c_str(), X_OK), 0) << stripped << " (make builds it)";
  const std::string build_id = ReadelfBuildId(stripped);
  ASSERT_FALSE(build_id.empty()) << "readelf -n " << stripped << " (binutils) gives no build id";
  ASSERT_EQ(build_id, ReadelfBuildId(unstripped)) << "strip kept the build id";
  if (RunTool("llvm-symbolizer", {"--version"}).empty()) {
    GTEST_SKIP() << "needs llvm-symbolizer (make deps installs llvm)";
  }
  testing::ScratchCgroup cgroup("stripped");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  testing::ScratchDir dir;
  const std::string cfg = dir.Join("stripped.pbtxt");
  ASSERT_TRUE(testing::WriteTextFile(
      cfg, absl::StrCat("buffers { size_kb: 16384 }\n", StacksOfCgroup(cgroup.path()))));
  const std::string out = dir.Join("stripped.pftrace");
  const std::string result = dir.Join("stripped.result");
  std::vector<std::string> record = {"record", "-c", cfg, "-o", out, "--"};
  for (const std::string& a : InCgroup(cgroup.dir() + "/cgroup.procs", stripped, {"2", result})) {
    record.push_back(a);
  }
  int code = 0;
  const std::string err = testing::RunRingsideCaptureStderr(record, &code);
  ASSERT_EQ(code, 0) << err;
  const std::map<std::string, int64_t> r = ReadResult(result);
  ASSERT_EQ(r.size(), 7u) << "the workload's result " << result;
  ExpectImportsCleanly(tp, out);

  // The reader's frames in the binary's mapping: rel_pc, name, build id.
  std::vector<std::tuple<int64_t, std::string, std::string>> frames;
  std::set<int64_t> pcs;
  for (const std::vector<std::string>& row :
       FramesIn(tp, out, r.at("reader_tid"), stripped, /*symbols=*/false)) {
    int64_t pc = 0;
    ASSERT_TRUE(row.size() == 3u && absl::SimpleAtoi(row[0], &pc)) << absl::StrJoin(row, ",");
    frames.emplace_back(pc, row[1], row[2]);
    pcs.insert(pc);
  }
  ASSERT_FALSE(pcs.empty()) << "no frame of the reader in " << stripped;
  // Later, elsewhere: llvm-symbolizer names the reader's function from the
  // unstripped file at a rel_pc of the file.
  const std::map<int64_t, std::set<std::string>> named = LlvmSymbolize(unstripped, pcs);
  std::set<std::string> all;
  for (const auto& [pc, names] : named) all.insert(names.begin(), names.end());
  EXPECT_TRUE(all.count("wait_for_pipe_data")) << absl::StrJoin(all, ", ");

  // The file's names: none, or one .dynsym exports and the unstripped file
  // agrees with (none of this binary's functions: nothing may be named).
  const std::set<std::string> exported = DynsymFunctions(stripped);
  int unnamed = 0;
  for (const auto& [pc, name, id] : frames) {
    unnamed += name.empty();
    const bool right = exported.count(name) > 0 && named.count(pc) > 0 && named.at(pc).count(name);
    EXPECT_TRUE(name.empty() || right) << "rel_pc " << pc << " named " << name << " in the file";
    EXPECT_EQ(id, build_id) << "the mapping's build id";
  }
  EXPECT_GT(unnamed, 0) << "the file counts no frame of " << stripped << " unnamed";
  std::printf("the reader's frames in %s: %zu, %d unnamed; named later %s\n", stripped.c_str(),
              frames.size(), unnamed, absl::StrJoin(all, ", ").c_str());

  // Perfetto's own symbolizer names each the same (it adds to rel_pc what
  // it takes for a wrong load bias, from the mapping's offsets: a file that
  // misstates them gets wrong names here).
  EXPECT_EQ(PerfettoSymbolize(tp, out, r.at("reader_tid"), stripped, unstripped), named)
      << "trace_processor's symbols of the reader's frames in " << stripped;
}

}  // namespace
}  // namespace ringside::agent
