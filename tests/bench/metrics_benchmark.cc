// What the agent's Prometheus metrics cost (issue 37 asks for less than
// 0.1% of one CPU at the default period): rendering a status
// (PrometheusText) and writing it as node_exporter's textfile
// (MetricsTextfile: a temporary file, then a rename), for a 2-CPU machine
// and for a 256-CPU one with per-CPU losses on every CPU (the largest
// text), plus the /proc and cgroup reads every status makes
// (ReadAgentMemory). Beside a memcpy of the same text, the baseline of the
// same run. Each reports its CPU per write and that CPU as a share of one
// CPU at the default 15 s period.

#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/config/defaults.h"
#include "agent/daemon/agent_memory.h"
#include "agent/metrics/metrics_textfile.h"
#include "agent/metrics/prometheus_text.h"
#include "tests/bench/bench_main.h"

namespace ringside::agent {
namespace {

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// An agent's status on a machine of `cpus` CPUs, both sources losing
// events of four kinds on every CPU.
control::StatusReply Status(int cpus) {
  control::StatusReply s;
  s.set_version("0.1.0-dev");
  s.set_uptime_ms(86'400'000);
  s.set_cpu_seconds(1234.5);
  for (const char* name : {"linux.bpf", "linux.ftrace"}) {
    control::SourceStatus* src = s.add_sources();
    src->set_name(name);
    src->set_state(control::SourceStatus::RUNNING);
    src->set_events(123'456'789'012);
    src->set_reader_cpu_seconds(345.25);
    for (int cpu = 0; cpu < cpus; cpu++) {
      for (const char* kind :
           {"sched_switch", "sched_waking", "sched_migrate_task", "ftrace_overrun"}) {
        control::SourceStatus::Loss* l = src->add_losses();
        l->set_cpu(cpu);
        l->set_kind(kind);
        l->set_events(1000 + static_cast<uint64_t>(cpu));
      }
    }
  }
  control::BufferStatus* b = s.add_buffers();
  b->set_size_bytes(64 << 20);
  b->set_fill_percent(100);
  s.mutable_durable()->set_entries(5000);
  s.mutable_streaming()->set_files_finished(100);
  s.mutable_memory()->set_cgroup("/system.slice/ringside.service");
  return s;
}

void SetCounters(benchmark::State& state, double cpu_ns, size_t bytes) {
  const double per_write = cpu_ns / static_cast<double>(state.iterations());
  state.counters["cpu_us_per_write"] = per_write / 1e3;
  state.counters["pct_of_a_cpu_at_15s"] =
      per_write / (static_cast<double>(kDefaultMetricsPeriodMs) * 1e6) * 100;
  state.counters["text_KiB"] = static_cast<double>(bytes) / 1024;
}

void BM_Memcpy(benchmark::State& state) {
  const std::string text = PrometheusText(Status(static_cast<int>(state.range(0))),
                                          {.kernel = "6.1.0", .per_cpu = state.range(1) != 0});
  std::string dst(text.size(), '\0');
  const double start = ThreadCpuNs();
  for (auto _ : state) {
    std::memcpy(dst.data(), text.data(), text.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, ThreadCpuNs() - start, text.size());
}

void BM_Render(benchmark::State& state) {
  const control::StatusReply status = Status(static_cast<int>(state.range(0)));
  const MetricsOptions options{.kernel = "6.1.0", .per_cpu = state.range(1) != 0};
  size_t bytes = 0;
  const double start = ThreadCpuNs();
  for (auto _ : state) {
    const std::string text = PrometheusText(status, options);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  SetCounters(state, ThreadCpuNs() - start, bytes);
}

void BM_RenderAndWriteTextfile(benchmark::State& state) {
  std::string dir = absl::StrCat(getenv("TMPDIR") != nullptr ? getenv("TMPDIR") : "/tmp",
                                 "/ringside-metrics-bench-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return state.SkipWithError("mkdtemp");
  const control::StatusReply status = Status(static_cast<int>(state.range(0)));
  MetricsTextfile::Options o;
  o.dir = dir;
  o.period = absl::Hours(1);  // The benchmark writes; the thread waits.
  o.metrics = {.kernel = "6.1.0", .per_cpu = state.range(1) != 0};
  o.status = [&status] { return status; };
  {
    absl::StatusOr<std::unique_ptr<MetricsTextfile>> m = MetricsTextfile::Start(std::move(o));
    if (!m.ok()) return state.SkipWithError(m.status().ToString().c_str());
    const double start = ThreadCpuNs();
    for (auto _ : state) {
      if (!(*m)->WriteOnce().ok()) return state.SkipWithError("write");
    }
    SetCounters(state, ThreadCpuNs() - start,
                PrometheusText(status, {.kernel = "6.1.0", .per_cpu = state.range(1) != 0}).size());
  }
  rmdir(dir.c_str());
}

// What every status reads besides the counters: /proc/self/smaps_rollup,
// /proc/self/cgroup and the memory cgroup's files.
void BM_ReadAgentMemory(benchmark::State& state) {
  const double start = ThreadCpuNs();
  for (auto _ : state) benchmark::DoNotOptimize(ReadAgentMemory());
  SetCounters(state, ThreadCpuNs() - start, 0);
}

// {CPUs, per CPU}
void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({2, 0})->Args({256, 0})->Args({256, 1})->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Memcpy)->Apply(Sizes);
BENCHMARK(BM_Render)->Apply(Sizes);
BENCHMARK(BM_RenderAndWriteTextfile)->Apply(Sizes);
BENCHMARK(BM_ReadAgentMemory)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  benchmark::ConsoleReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
