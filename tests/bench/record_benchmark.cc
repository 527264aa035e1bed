// What `ringside record` costs the machine it records: the agent's CPU time
// per million events and its peak RSS, while a scheduling storm runs (pairs
// of processes ping-ponging a byte over pipes, as `perf bench sched pipe` and
// hackbench do). BM_Record/bpf is the default config (BPF); BM_Record/ftrace
// records the same events with ftrace only, as the baseline of the same run.
// Needs root; the events are counted from the trace written.

#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ringside/trace/trace.pb.h"
#include "tests/testing/paths.h"
#include "tests/testing/workloads.h"

namespace {

const std::string kBin = ringside::testing::RingsideBinary();

uint64_t CountEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ringside::trace::Trace t;
  if (!t.ParseFromString(bytes)) return 0;
  uint64_t n = 0;
  for (const auto& p : t.packet()) {
    n += static_cast<uint64_t>(p.ftrace_events().event_size() +
                               p.ftrace_events().compact_sched().switch_timestamp_size() +
                               p.ftrace_events().compact_sched().waking_timestamp_size());
  }
  return n;
}

void BM_Record(benchmark::State& state, bool bpf) {
  if (geteuid() != 0) return state.SkipWithError("needs root (BPF and tracefs)");
  const std::string cfg = "/tmp/ringside_bench_record.pbtxt";
  const std::string out = "/tmp/ringside_bench_record.pftrace";
  {
    std::ofstream f(cfg);
    f << "buffers { size_kb: 262144 }\n";
    if (bpf) f << "data_sources { config { name: \"linux.bpf\" } }\n";
    f << "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n";
    for (const char* e : {"sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup_new",
                          "sched/sched_process_fork", "sched/sched_process_exec",
                          "sched/sched_process_exit", "task/task_rename"}) {
      f << "  " << (bpf ? "bpf_fallback_events" : "ftrace_events") << ": \"" << e << "\"\n";
    }
    f << "  buffer_size_kb: 16384 } } }\n";
  }
  double cpu_s = 0, max_rss_kb = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
    const pid_t rec = fork();
    if (rec == 0) {
      if (freopen("/dev/null", "w", stderr) == nullptr) _exit(125);
      execl(kBin.c_str(), kBin.c_str(), "record", "-c", cfg.c_str(), "-o", out.c_str(),
            "--duration", "3s", static_cast<char*>(nullptr));
      _exit(126);
    }
    int status = 0;
    rusage ru{};
    wait4(rec, &status, 0, &ru);
    ringside::testing::StopProcesses(storm);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return state.SkipWithError("ringside record failed");
    }
    cpu_s += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    max_rss_kb = std::max(max_rss_kb, static_cast<double>(ru.ru_maxrss));
    events += CountEvents(out);
  }
  unlink(cfg.c_str());
  unlink(out.c_str());
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["agent_cpu_s_per_M_events"] =
      events ? cpu_s / (static_cast<double>(events) / 1e6) : 0;
  state.counters["events_per_agent_cpu_s"] = cpu_s > 0 ? static_cast<double>(events) / cpu_s : 0;
  state.counters["peak_rss_MiB"] = max_rss_kb / 1024;
  state.counters["events_recorded"] =
      static_cast<double>(events) / static_cast<double>(state.iterations());
}

BENCHMARK_CAPTURE(BM_Record, bpf, true)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);
BENCHMARK_CAPTURE(BM_Record, ftrace, false)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
