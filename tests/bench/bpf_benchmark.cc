// bpf/ benchmarks (need root and BTF; they say so and stop otherwise).
//
// BM_RingReader_Consume: records/s our RingReader hands out from per-CPU
// rings filled at kernel speed by a BPF filler; the baseline is libbpf's
// ring_buffer consuming the same rings (BM_Libbpf_Consume).
//
// BM_KernelCost: what each of our programs costs the kernel per event
// (the kernel's own run_time_ns / run_cnt with BPF stats on) while a
// context-switch storm runs; the baseline is an empty sched_switch program
// attached at the same time (the cost of the attachment and of the kernel's
// own time accounting). step_* programs time the parts of ours alone: the
// clock read, a ring reserve + submit, the fill query of rs_submit.

#include <benchmark/benchmark.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "bench_programs.skel.h"
#include "bpf/event_source.h"
#include "bpf/sched_events.h"

namespace ringside::bpf {
namespace {

constexpr uint32_t kRecordsPerCpu = 100000;  // 9.6 MB of 96-byte slots per ring.

struct Fixture {
  std::unique_ptr<EventSource> source;
  rs_bench_programs* programs = nullptr;
  std::string error;

  Fixture() {
    EventSource::Options options;
    options.ring_size_per_cpu = 16 << 20;
    options.filters.tgids = {1 << 30};  // Our own programs record nothing here.
    absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
    if (!s.ok()) {
      error = std::string(s.status().message());
      return;
    }
    source = std::move(*s);
    programs = rs_bench_programs__open();
    if (programs == nullptr || bpf_map__reuse_fd(programs->maps.rings, source->rings_map_fd()) ||
        bpf_map__reuse_fd(programs->maps.drops, source->drops_map_fd()) ||
        rs_bench_programs__load(programs) != 0) {
      error = "cannot load the benchmark's BPF programs";
    }
  }
  ~Fixture() {
    if (programs != nullptr) rs_bench_programs__destroy(programs);
  }

  // Fills every CPU's ring with kRecordsPerCpu sched_switch records.
  bool Fill() {
    for (int cpu = 0; cpu < source->num_cpus(); cpu++) {
      uint64_t args[1] = {kRecordsPerCpu};
      LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args),
                  .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = static_cast<uint32_t>(cpu));
      if (bpf_prog_test_run_opts(bpf_program__fd(programs->progs.fill_ring), &opts) != 0) {
        return false;
      }
    }
    return true;
  }
};

Fixture& GetFixture() {
  static Fixture* f = new Fixture();
  return *f;
}

void BM_RingReader_Consume(benchmark::State& state) {
  Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  uint64_t records = 0, checksum = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!f.Fill()) return state.SkipWithError("BPF_PROG_TEST_RUN of the filler failed");
    state.ResumeTiming();
    records += f.source->Drain([&](uint32_t, absl::Span<const RecordView> batch) {
      for (const RecordView& r : batch) {
        // What a consumer does first: read the header and one field.
        const auto* e = static_cast<const rs_sched_switch*>(r.data);
        checksum += e->h.type + static_cast<uint32_t>(e->next_pid);
      }
    });
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(records));
  state.SetBytesProcessed(static_cast<int64_t>(records * sizeof(rs_sched_switch)));
}
BENCHMARK(BM_RingReader_Consume)->Unit(benchmark::kMillisecond)->UseRealTime();

int OnLibbpfRecord(void* ctx, void* data, size_t) {
  const auto* e = static_cast<const rs_sched_switch*>(data);
  *static_cast<uint64_t*>(ctx) += e->h.type + static_cast<uint32_t>(e->next_pid);
  return 0;
}

void BM_Libbpf_Consume(benchmark::State& state) {
  Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  uint64_t checksum = 0;
  ring_buffer* rb = nullptr;
  for (int fd : f.source->ring_fds()) {
    if (rb == nullptr) {
      rb = ring_buffer__new(fd, OnLibbpfRecord, &checksum, nullptr);
    } else {
      ring_buffer__add(rb, fd, OnLibbpfRecord, &checksum);
    }
  }
  if (rb == nullptr) return state.SkipWithError("ring_buffer__new failed");
  uint64_t records = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!f.Fill()) return state.SkipWithError("BPF_PROG_TEST_RUN of the filler failed");
    state.ResumeTiming();
    const int n = ring_buffer__consume(rb);
    if (n > 0) records += static_cast<uint64_t>(n);
  }
  ring_buffer__free(rb);
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(records));
  state.SetBytesProcessed(static_cast<int64_t>(records * sizeof(rs_sched_switch)));
}
BENCHMARK(BM_Libbpf_Consume)->Unit(benchmark::kMillisecond)->UseRealTime();

// The kernel's run_time_ns / run_cnt of a program (0 if it never ran).
double NsPerRun(int prog_fd) {
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0 || info.run_cnt == 0) return 0;
  return static_cast<double>(info.run_time_ns) / static_cast<double>(info.run_cnt);
}

// Each iteration: a child sleeps briefly 2,000 times (4,000 switches plus
// wakeups) while every program of ours and the empty baseline are attached.
void BM_KernelCost(benchmark::State& state) {
  EventSource::Options options;
  options.ring_size_per_cpu = static_cast<size_t>(state.range(0)) << 10;
  absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
  if (!s.ok()) return state.SkipWithError(std::string(s.status().message()).c_str());
  EventSource& source = **s;
  Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  const int stats_fd = EventSource::EnableKernelStats();
  if (stats_fd < 0) return state.SkipWithError("BPF_ENABLE_STATS failed");
  bpf_link* baseline = bpf_program__attach(f.programs->progs.empty_sched_switch);
  bpf_link* steps[] = {bpf_program__attach(f.programs->progs.step_clock),
                       bpf_program__attach(f.programs->progs.step_reserve_submit),
                       bpf_program__attach(f.programs->progs.step_query)};
  if (baseline == nullptr || !source.Attach().ok()) {
    close(stats_fd);
    return state.SkipWithError("attach failed");
  }
  for (auto _ : state) {
    const pid_t child = fork();
    if (child == 0) {
      for (int i = 0; i < 2000; i++) usleep(20);
      _exit(0);
    }
    int status;
    while (waitpid(child, &status, WNOHANG) == 0) {
      source.Poll(5, [](uint32_t, absl::Span<const RecordView>) {}).IgnoreError();
    }
  }
  source.Detach();
  bpf_link__destroy(baseline);
  for (bpf_link* l : steps) bpf_link__destroy(l);
  for (bpf_program* p : {f.programs->progs.step_clock, f.programs->progs.step_reserve_submit,
                         f.programs->progs.step_query}) {
    const double ns = NsPerRun(bpf_program__fd(p));
    if (ns > 0) state.counters[std::string("ns_") + bpf_program__name(p)] = ns;
  }
  // The kernel's own accounting, per program.
  const double baseline_ns = NsPerRun(bpf_program__fd(f.programs->progs.empty_sched_switch));
  state.counters["ns_empty_sched_switch"] = baseline_ns;
  for (const EventSource::ProgramStats& p : source.program_stats()) {
    if (p.run_count == 0) continue;
    const double ns = static_cast<double>(p.run_time_ns) / static_cast<double>(p.run_count);
    state.counters["ns_" + p.name.substr(p.name.find('_') + 1)] = ns;
    if (p.name == "handle_sched_switch" && baseline_ns > 0) {
      state.counters["sched_switch_vs_empty"] = ns / baseline_ns;
    }
  }
  close(stats_fd);
}
// Ring size per CPU in KiB: a ring that stays in cache costs less per record.
BENCHMARK(BM_KernelCost)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5)
    ->Arg(256)
    ->Arg(4096);

}  // namespace
}  // namespace ringside::bpf

BENCHMARK_MAIN();
