// What a new process costs the agent's descriptors, without the kernel:
// the fork, exec, exit and free a loop of `fork + exec /bin/true` makes,
// told to a DescriptorTracker (the BPF reader's thread) and applied to the
// DurableStore beside the ring (the buffer owner's), as a recording does.
//
//   BM_ForkExecLoop/fresh:1  a new tracker and store per iteration, of
//                            fewer processes than the tracker remembers
//                            exits of: a recording's first seconds, its
//                            tables growing with every new pid (as in
//                            bench-peers' runs)
//   BM_ForkExecLoop/fresh:0  one tracker and store, warmed up past that:
//                            an agent that has run for a while, exits
//                            remembered and forgotten at the same pace
//
// The figure is thread CPU time per process (ns_per_process), of both
// sides together; tell_ns and apply_ns are each side's share.
// `thread_costs.sh WL=forks` gives the same on the real agent, noisier.

#include <time.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "agent/descriptors/descriptor_tracker.h"
#include "benchmark/benchmark.h"
#include "buffer/durable_store.h"
#include "tests/bench/bench_main.h"

namespace ringside::agent {
namespace {

// Each process's exit and its thread's are remembered: the tracker starts
// forgetting past kMaxRememberedExits / 2 processes.
constexpr int kProcessesPerIteration = 8000;
static_assert(kProcessesPerIteration < DescriptorTracker::kMaxRememberedExits / 2);
constexpr int32_t kShellPid = 1000;
constexpr uint64_t kCgroupId = 77;
// The default config's durable store and ring.
constexpr size_t kStoreBytes = 2048 << 10;
constexpr size_t kRingBytes = 64 << 20;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Every process in one cgroup, outside any pod: its path is read once.
DescriptorTracker::CgroupLookup OneCgroup() {
  return {[](int32_t) -> std::optional<std::string> { return "/system.slice/bench.service"; },
          [](const std::string&) -> std::optional<uint64_t> { return kCgroupId; },
          [](const std::string&) -> std::optional<PodNames> { return std::nullopt; }};
}

struct Loop {
  std::unique_ptr<DescriptorTracker> tracker;
  std::unique_ptr<buffer::DurableStore> store;
  int32_t next_pid = kShellPid + 1;
  uint64_t ts = 1'000'000'000;
  uint64_t ring_written = 0;

  Loop()
      : tracker(std::make_unique<DescriptorTracker>(OneCgroup())),
        store(std::make_unique<buffer::DurableStore>(kStoreBytes, kRingBytes)) {}

  // One process's life, as the reader tells it: 2.6 ms apart, a pid each
  // (the kernel hands them out in order up to pid_max).
  void Tell() {
    const int32_t pid = next_pid;
    next_pid = next_pid >= 4'000'000 ? kShellPid + 1 : next_pid + 1;
    tracker->OnFork(ts += 1000, kShellPid, kShellPid, pid, pid, "bash");
    static constexpr char kArgv[] = "/bin/true";
    tracker->OnExec(ts += 100'000, pid, pid, "/bin/true", std::string_view(kArgv, sizeof(kArgv)),
                    "true", kShellPid, 0, kCgroupId);
    tracker->OnExit(ts += 500'000, pid, pid, 1, "true");
    tracker->OnFree(ts += 2'000'000, pid, pid, "true");
  }
  // The owner's pass: updates applied, then a drain of the ring (a
  // process's events are ~1 KB of it).
  void Apply(int processes) {
    tracker->ApplyTo(store.get());
    ring_written += uint64_t(processes) * 1024;
    store->Drained(ring_written);
  }
};

void BM_ForkExecLoop(benchmark::State& state) {
  const bool fresh = state.range(0) != 0;
  // The owner applies what the reader told about every 100 ms: a few
  // dozen processes of a busy shell loop.
  constexpr int kPerApply = 32;
  std::unique_ptr<Loop> loop = std::make_unique<Loop>();
  if (!fresh) {
    for (size_t i = 0; i < DescriptorTracker::kMaxRememberedExits; i += kPerApply) {
      for (int j = 0; j < kPerApply; j++) loop->Tell();
      loop->Apply(kPerApply);
    }
  }
  int64_t tell_ns = 0, apply_ns = 0;
  for (auto _ : state) {
    if (fresh) {
      state.PauseTiming();
      loop = std::make_unique<Loop>();
      state.ResumeTiming();
    }
    for (int i = 0; i < kProcessesPerIteration; i += kPerApply) {
      const int64_t t0 = ThreadCpuNs();
      for (int j = 0; j < kPerApply; j++) loop->Tell();
      const int64_t t1 = ThreadCpuNs();
      loop->Apply(kPerApply);
      apply_ns += ThreadCpuNs() - t1;
      tell_ns += t1 - t0;
    }
  }
  const double processes = double(state.iterations()) * kProcessesPerIteration;
  state.counters["ns_per_process"] = double(tell_ns + apply_ns) / processes;
  state.counters["tell_ns"] = double(tell_ns) / processes;
  state.counters["apply_ns"] = double(apply_ns) / processes;
  state.counters["store_entries"] = double(loop->store->stats().entries);
}
BENCHMARK(BM_ForkExecLoop)
    ->ArgName("fresh")
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  benchmark::ConsoleReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
