// bpf/ benchmarks (need root and BTF; they say so and stop otherwise).
//
// BM_RingReader_Consume: records/s our RingReader hands out from per-CPU
// rings filled at kernel speed by a BPF filler; the baseline is libbpf's
// ring_buffer consuming the same rings (BM_Libbpf_Consume).
//
// BM_KernelCost: what each of our programs costs the kernel per event
// (the kernel's own run_time_ns / run_cnt with BPF stats on) while a
// context-switch storm runs; the baselines are an empty sched_switch and an
// empty sched_waking program attached at the same time (the cost of the
// attachment, of the kernel's own time accounting and of the caches as the
// workload leaves them). Two workloads: a sleep loop (switches to and from
// idle, wakeups from a timer on a CPU waking up: cold caches) and a pipe
// ping-pong pinned to one CPU (an event storm's hot caches). step_* programs time the parts of ours
// alone: the clock read, a ring reserve + submit, the fill query of rs_submit.
//
// BM_VsClock: each of our programs against a program that only reads the
// clock on the same tracepoint, in alternate runs of one workload: the
// ping-pong, and a loop of 2,000 forks (fork, exit, free, new tasks'
// wakeups and their migrations by the thousand, where the ping-pong has a
// handful of each, cold).
//
// BM_LoadAttach: the CPU of starting and stopping the programs, as one
// object against each group's own.

#include <benchmark/benchmark.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "bench_programs.skel.h"
#include "bpf/event_source.h"
#include "bpf/sched_events.h"
#include "bpf/stack_events.h"
#include "bpf/stack_maps.h"

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
      return;
    }
    // The perf clock of step_clock_perf: a counting dummy event per CPU.
    for (int cpu = 0; cpu < source->num_cpus(); cpu++) {
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = PERF_TYPE_SOFTWARE;
      attr.config = PERF_COUNT_SW_DUMMY;
      const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, 0));
      if (fd < 0) continue;  // An offline CPU: the step counts the failed reads.
      clock_fds.push_back(fd);
      const uint32_t key = static_cast<uint32_t>(cpu);
      bpf_map_update_elem(bpf_map__fd(programs->maps.clock_events), &key, &fd, BPF_ANY);
    }
  }
  ~Fixture() {
    if (programs != nullptr) rs_bench_programs__destroy(programs);
    for (int fd : clock_fds) close(fd);
  }
  std::vector<int> clock_fds;

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

// The kernel's run count and run time of a program (BPF stats on).
struct RunStats {
  uint64_t count = 0;
  uint64_t time_ns = 0;
};

RunStats ReadRunStats(const bpf_program* p) {
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0) return {};
  return {info.run_cnt, info.run_time_ns};
}

constexpr int64_t kSleepLoop = 0;
constexpr int64_t kPingPong = 1;
constexpr int64_t kForkLoop = 2;

// A child that sleeps briefly 2,000 times: each sleep is a switch to idle
// and a timer wakeup on a CPU coming out of idle (cold caches).
pid_t StartSleepLoop() {
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 2000; i++) usleep(20);
    _exit(0);
  }
  return child;
}

// A child and a grandchild, both on the last CPU, passing a byte back and
// forth 20,000 times over pipes: switches straight from one to the other
// and wakeups of a task on the waker's own CPU, the hot-cache case of an
// event storm. The caller polls the rings from another CPU.
pid_t StartPinnedPingPong() {
  const pid_t child = fork();
  if (child != 0) return child;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1, &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);
  int ping[2], pong[2];
  if (pipe(ping) != 0 || pipe(pong) != 0) _exit(1);
  constexpr int kRoundTrips = 20000;
  char byte = 0;
  const pid_t peer = fork();
  if (peer == 0) {
    for (int i = 0; i < kRoundTrips; i++) {
      if (read(ping[0], &byte, 1) != 1 || write(pong[1], &byte, 1) != 1) _exit(1);
    }
    _exit(0);
  }
  for (int i = 0; i < kRoundTrips; i++) {
    if (write(ping[1], &byte, 1) != 1 || read(pong[0], &byte, 1) != 1) break;
  }
  int status;
  waitpid(peer, &status, 0);
  _exit(0);
}

// A child that forks 2,000 children one after the other, each exiting at
// once, unpinned: a fork, a new task's wakeup (often on the other CPU: a
// migration), an exit and a free each, what a build or a fork-heavy
// service makes.
pid_t StartForkLoop() {
  const pid_t child = fork();
  if (child != 0) return child;
  for (int i = 0; i < 2000; i++) {
    const pid_t c = fork();
    if (c == 0) _exit(0);
    if (c < 0) _exit(1);
    int status;
    waitpid(c, &status, 0);
  }
  _exit(0);
}

pid_t StartWorkload(int64_t workload) {
  switch (workload) {
    case kSleepLoop:
      return StartSleepLoop();
    case kPingPong:
      return StartPinnedPingPong();
    default:
      return StartForkLoop();
  }
}

// The step that runs ours with Options::batch_switches off.
constexpr int64_t kOursUnbatched = 14;

// Each iteration: one run of the workload while every program of ours and
// the empty baselines are attached.
void BM_KernelCost(benchmark::State& state) {
  EventSource::Options options;
  options.ring_size_per_cpu = static_cast<size_t>(state.range(0)) << 10;
  options.batch_sched = state.range(2) != kOursUnbatched;
  absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
  if (!s.ok()) return state.SkipWithError(std::string(s.status().message()).c_str());
  EventSource& source = **s;
  Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  // Programs on one tracepoint run one after the other, and each one's
  // figure depends on what ran before it (a clock read right after the
  // kernel's own work waits for it; the next one does not), so ours run
  // alone after the baselines, and each step in a run of its own.
  const bpf_program* all_steps[] = {
      nullptr,
      f.programs->progs.step_clock,
      f.programs->progs.step_reserve_submit,
      f.programs->progs.step_query,
      f.programs->progs.step_switch_minimal,
      f.programs->progs.step_wakeup_minimal,
      f.programs->progs.step_switch_fields,
      f.programs->progs.step_switch_no_query,
      f.programs->progs.step_switch_batched,
      f.programs->progs.step_switch_batched_rq_clock,
      f.programs->progs.step_clock_perf,
      f.programs->progs.step_switch_batched_perf_clock,
      f.programs->progs.step_switch_lockless,
      f.programs->progs.step_wakeup_lockless,
      nullptr,  // kOursUnbatched
      f.programs->progs.step_wakeup_clock,
  };
  const bpf_program* step = all_steps[state.range(2)];
  std::vector<const bpf_program*> bench_programs = {f.programs->progs.empty_sched_switch,
                                                    f.programs->progs.empty_sched_waking};
  if (step != nullptr) bench_programs.push_back(step);
  const int stats_fd = EventSource::EnableKernelStats();
  if (stats_fd < 0) return state.SkipWithError("BPF_ENABLE_STATS failed");
  std::vector<RunStats> before;
  std::vector<bpf_link*> links;
  bool attached = true;
  for (const bpf_program* p : bench_programs) {
    before.push_back(ReadRunStats(p));
    links.push_back(bpf_program__attach(p));
    attached &= links.back() != nullptr;
  }
  if (step == nullptr) attached &= source.Attach().ok();
  if (attached) {
    for (auto _ : state) {
      const pid_t child = StartWorkload(state.range(1));
      if (child < 0) break;
      int status;
      // The steps write into the fixture's rings.
      EventSource& rings = step == nullptr ? source : *f.source;
      while (waitpid(child, &status, WNOHANG) == 0) {
        rings.Poll(5, [](uint32_t, absl::Span<const RecordView>) {}).IgnoreError();
      }
    }
  }
  source.Detach();
  for (bpf_link* l : links) bpf_link__destroy(l);
  if (!attached) {
    close(stats_fd);
    return state.SkipWithError("attach failed");
  }
  // The kernel's own accounting, per program, over this run only.
  std::map<std::string, double> ns_per_run;
  for (size_t i = 0; i < bench_programs.size(); i++) {
    const RunStats after = ReadRunStats(bench_programs[i]);
    if (after.count == before[i].count) continue;
    ns_per_run[bpf_program__name(bench_programs[i])] =
        static_cast<double>(after.time_ns - before[i].time_ns) /
        static_cast<double>(after.count - before[i].count);
  }
  for (const EventSource::ProgramStats& p : source.program_stats()) {
    if (p.run_count == 0) continue;
    ns_per_run[p.name.substr(p.name.find('_') + 1)] =
        static_cast<double>(p.run_time_ns) / static_cast<double>(p.run_count);
  }
  close(stats_fd);
  for (const auto& [name, ns] : ns_per_run) state.counters["ns_" + name] = ns;
  if (f.programs->bss->perf_clock_failures != 0) {
    state.counters["perf_clock_failures"] =
        static_cast<double>(f.programs->bss->perf_clock_failures);
  }
  for (const char* kind : {"sched_switch", "sched_waking"}) {
    const auto ours = ns_per_run.find(kind);
    const auto empty = ns_per_run.find(std::string("empty_") + kind);
    if (ours != ns_per_run.end() && empty != ns_per_run.end() && empty->second > 0) {
      state.counters[std::string(kind) + "_vs_empty"] = ours->second / empty->second;
    }
  }
}
// Args: the ring size per CPU in KiB (a ring that stays in cache costs less
// per record), the workload, and which step runs instead of ours (0: ours;
// 1 the clock, 2 reserve + submit, 3 the fill query, 4 and 5 a minimal
// record on sched_switch and on sched_waking, 6 and 7 ours on sched_switch
// without the comms and the fill query, then without the query only; 8
// ours on sched_switch into a per-CPU batch, one ring output per 42; 9 the
// same with the run queue's clock instead of ours; 10 a read of a perf
// event's enabled time (local_clock) instead of our clock; 11 the batch
// stamped with it; 12 and 13 ours on sched_switch and on sched_waking
// into a lock-free per-CPU ring of fixed slots instead of a BPF ringbuf;
// 14 ours with no scheduling records batched, each reserved on its own in
// the ring as before batching; 15 the clock alone on sched_waking).
BENCHMARK(BM_KernelCost)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5)
    ->ArgNames({"ring_kb", "pingpong", "step"})
    ->Args({256, kSleepLoop, 0})
    ->Args({4096, kSleepLoop, 0})
    ->Args({256, kPingPong, 0})
    ->Args({4096, kPingPong, 0})
    ->Args({4096, kPingPong, 1})
    ->Args({4096, kPingPong, 2})
    ->Args({4096, kPingPong, 3})
    ->Args({4096, kPingPong, 4})
    ->Args({4096, kPingPong, 5})
    ->Args({4096, kPingPong, 6})
    ->Args({4096, kPingPong, 7})
    ->Args({4096, kPingPong, 8})
    ->Args({4096, kPingPong, 9})
    ->Args({4096, kPingPong, 10})
    ->Args({4096, kPingPong, 11})
    ->Args({4096, kPingPong, 12})
    ->Args({4096, kPingPong, 13})
    ->Args({4096, kPingPong, kOursUnbatched})
    ->Args({4096, kSleepLoop, kOursUnbatched})
    ->Args({4096, kPingPong, 15});

// The median of the iterations' ratios as `name`, and their range as
// name_lo and name_hi: one slow moment moves the range, not the figure the
// goals are checked on. Nothing for no ratio.
void SetMedianAndRange(benchmark::State& state, const std::string& name, std::vector<double>& r) {
  if (r.empty()) return;
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  state.counters[name] = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
  state.counters[name + "_lo"] = r.front();
  state.counters[name + "_hi"] = r.back();
}

// BM_VsClock: each of our programs against one that only reads the clock
// on the same tracepoint (the floor of a record: its timestamp), in
// alternate runs of one workload, ours then the clocks, 7 times each: the
// ratio `<event>_vs_clock` (the median of the 7 runs' ratios; _lo and _hi
// their range) is what issue 38's goals are set in. The pinned
// ping-pong for switches and wakings, the fork loop for the process
// programs and migrations. With `stacks` (RS_STACKS_* flags; 7: both
// parts), ours also take the kernel and user stacks of threads that block (bpf_config.stacks'
// defaults but no CPU sampling, which has no program on these tracepoints): in the ping-pong each
// switch takes one thread off the CPU asleep, the most stacks a switch can cost. On a kernel with
// kprobes a share of the blocks shorter than 1 ms are taken; without, every one. With `stalls`,
// ours also follow every task's stalls for the `blocked` and `runqueue_delay` triggers
// (bpf/stalls.bpf.h; thresholds no stall of the workload reaches): the lookups in stall_tasks
// each switch and wakeup pays.
void BM_VsClock(benchmark::State& state) {
  EventSource::Options options;
  options.ring_size_per_cpu = 4096 << 10;
  if (state.range(2) != 0) options.stalls = {1'000'000'000, 50'000'000, 16384};
  if (state.range(1) != 0) {
    options.stacks.flags = static_cast<uint32_t>(state.range(1));
    options.stacks.max_depth = 32;
    options.stacks.max_blocked_tasks = 16384;
    options.stacks.blocked_period_ns = 1'000'000;
  }
  absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
  if (!s.ok()) return state.SkipWithError(std::string(s.status().message()).c_str());
  EventSource& source = **s;
  Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  // Each clock program, named as program_stats() names ours without its
  // handle_ prefix.
  std::vector<std::pair<bpf_program*, std::string>> clocks = {
      {f.programs->progs.step_clock, "sched_switch"},
      {f.programs->progs.step_wakeup_clock, "sched_waking"},
      {f.programs->progs.clock_sched_wakeup_new, "sched_wakeup_new"},
      {f.programs->progs.clock_sched_migrate_task, "sched_migrate_task"},
      {f.programs->progs.clock_process_fork, "process_fork"},
      {f.programs->progs.clock_process_exit, "process_exit"},
      {f.programs->progs.clock_process_free, "process_free"},
  };
  // With blocked stacks on a kernel with kprobes, resume_blocked against a
  // clock-only kprobe on the same function (resume_blocked_vs_clock); its
  // time also counts as the switch's (sched_switch_vs_clock).
  const std::string resume_function =
      (state.range(1) & RS_STACKS_BLOCKED) != 0 ? ProbeableResumeFunction() : "";
  if (!resume_function.empty())
    clocks.push_back({f.programs->progs.clock_resume, "resume_blocked"});
  const int stats_fd = EventSource::EnableKernelStats();
  if (stats_fd < 0) return state.SkipWithError("BPF_ENABLE_STATS failed");
  std::map<std::string, RunStats> ours, clock;
  // Per iteration and event, ours and the clock's ns per run: the ratio is
  // taken within each iteration (the machine's state of the moment for
  // both), then its median and range over the iterations.
  std::map<std::string, std::vector<double>> ratios;
  // resume_blocked's own part of ours' sched_switch time.
  uint64_t resume_ns = 0;
  const auto run_workload = [&](EventSource& rings) {
    const pid_t child = StartWorkload(state.range(0));
    if (child < 0) return false;
    int status;
    while (waitpid(child, &status, WNOHANG) == 0) {
      rings.Poll(5, [](uint32_t, absl::Span<const RecordView>) {}).IgnoreError();
    }
    rings.Drain([](uint32_t, absl::Span<const RecordView>) {});
    return true;
  };
  // A program's event: its name without handle_ and without the suffix of
  // its flavour (_raw, _pre_5_18), as the clocks are named.
  const auto event_of = [](std::string name) {
    name = name.substr(name.find('_') + 1);
    for (const char* suffix : {"_raw", "_pre_5_18"}) {
      if (absl::EndsWith(name, suffix)) name.resize(name.size() - std::strlen(suffix));
    }
    return name;
  };
  bool ok = true;
  for (auto _ : state) {
    // Counted between attach and detach only: both run the programs with
    // recording off (a cheap path the clocks do not have).
    ok = source.Attach().ok();
    const std::vector<EventSource::ProgramStats> before = source.program_stats();
    ok = ok && run_workload(source);
    const std::vector<EventSource::ProgramStats> after = source.program_stats();
    source.Detach();
    std::map<std::string, RunStats> ours_now;
    for (size_t i = 0; i < after.size() && i < before.size(); i++) {
      // The kprobe that takes blocked threads' stacks as they run again
      // (a kernel with kprobes) is part of what a switch costs: its time
      // counts as the switch's (not the kprobe's own entry, which the
      // kernel does not time).
      const bool resume = after[i].name == "resume_blocked";
      RunStats& r = ours_now[resume ? "sched_switch" : event_of(after[i].name)];
      if (!resume) r.count += after[i].run_count - before[i].run_count;
      r.time_ns += after[i].run_time_ns - before[i].run_time_ns;
      if (resume) {
        resume_ns += after[i].run_time_ns - before[i].run_time_ns;
        ours_now["resume_blocked"] = {after[i].run_count - before[i].run_count,
                                      after[i].run_time_ns - before[i].run_time_ns};
      }
    }
    for (const auto& [name, r] : ours_now) {
      ours[name].count += r.count;
      ours[name].time_ns += r.time_ns;
    }
    if (!ok) break;
    std::vector<bpf_link*> links;
    for (const auto& [p, name] : clocks) {
      links.push_back(p == f.programs->progs.clock_resume
                          ? bpf_program__attach_kprobe(p, false, resume_function.c_str())
                          : bpf_program__attach(p));
      ok &= links.back() != nullptr;
    }
    std::vector<RunStats> clock_before;
    for (const auto& [p, name] : clocks) clock_before.push_back(ReadRunStats(p));
    ok = ok && run_workload(*f.source);
    std::map<std::string, RunStats> clock_now;
    for (size_t i = 0; i < clocks.size(); i++) {
      const RunStats after_clock = ReadRunStats(clocks[i].first);
      const std::string& name = clocks[i].second;
      const RunStats now{after_clock.count - clock_before[i].count,
                         after_clock.time_ns - clock_before[i].time_ns};
      clock_now[name] = now;
      clock[name].count += now.count;
      clock[name].time_ns += now.time_ns;
      const auto o = ours_now.find(name);
      if (now.count == 0 || now.time_ns == 0 || o == ours_now.end() || o->second.count == 0) {
        continue;
      }
      ratios[name].push_back(
          (static_cast<double>(o->second.time_ns) / static_cast<double>(o->second.count)) /
          (static_cast<double>(now.time_ns) / static_cast<double>(now.count)));
    }
    // With the kprobe: ours per switch (the switch's program and the
    // kprobe's) against both clocks' per switch.
    const RunStats& sw = ours_now["sched_switch"];
    const RunStats& clock_sw = clock_now["sched_switch"];
    if (!resume_function.empty() && sw.count > 0 && clock_sw.count > 0) {
      const double clocks_per_switch =
          static_cast<double>(clock_sw.time_ns + clock_now["resume_blocked"].time_ns) /
          static_cast<double>(clock_sw.count);
      ratios["blocked_path"].push_back(static_cast<double>(sw.time_ns) /
                                       static_cast<double>(sw.count) / clocks_per_switch);
    }
    for (bpf_link* l : links) bpf_link__destroy(l);
    if (!ok) break;
  }
  close(stats_fd);
  if (!ok) return state.SkipWithError("attaching or running the workload failed");
  for (const auto& [name, c] : clock) {
    const auto o = ours.find(name);
    if (c.count == 0 || o == ours.end() || o->second.count == 0) continue;
    const double ours_ns = static_cast<double>(o->second.time_ns) / o->second.count;
    const double clock_ns = static_cast<double>(c.time_ns) / c.count;
    state.counters["ns_" + name] = ours_ns;
    state.counters["ns_clock_" + name] = clock_ns;
    state.counters["n_" + name] = static_cast<double>(o->second.count) / state.iterations();
    if (name == "sched_switch" && resume_ns > 0) {
      state.counters["ns_sched_switch_resume"] = static_cast<double>(resume_ns) / o->second.count;
    }
    SetMedianAndRange(state, name + "_vs_clock", ratios[name]);
  }
  SetMedianAndRange(state, "sched_switch_vs_both_clocks", ratios["blocked_path"]);
}
BENCHMARK(BM_VsClock)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(7)
    ->ArgNames({"workload", "stacks", "stalls"})
    ->Args({kPingPong, 0, 0})
    ->Args({kForkLoop, 0, 0})
    ->Args({kPingPong, 0, 1})
    ->Args({kForkLoop, 0, 1})
    ->Args({kPingPong, RS_STACKS_BLOCKED | RS_STACKS_KERNEL | RS_STACKS_USER, 0})
    ->Args({kForkLoop, RS_STACKS_BLOCKED | RS_STACKS_KERNEL | RS_STACKS_USER, 0})
    ->Args({kPingPong, RS_STACKS_BLOCKED | RS_STACKS_KERNEL, 0})
    ->Args({kPingPong, RS_STACKS_BLOCKED | RS_STACKS_USER, 0})
    ->Args({kPingPong, RS_STACKS_BLOCKED, 0});

// BM_CpuSamples: the kernel's side of CPU sampling (bpf_config.stacks.cpu_hz,
// kernel and user stacks) at `hz`, for 5 s of an idle machine (busy 0) or
// of hackbench (busy 1; rt-tests, else skipped): samples a second, the
// sampling program's ns a sample (the kernel's count, BPF_ENABLE_STATS;
// not the timer interrupt's own entry) and that as a percentage of one CPU.
// The agent's side is bench-peers' (WORKLOADS=idle, rs-nostk).
void BM_CpuSamples(benchmark::State& state) {
  EventSource::Options options;
  options.ring_size_per_cpu = 4096 << 10;
  options.stacks.flags = RS_STACKS_KERNEL | RS_STACKS_USER;
  options.stacks.max_depth = 32;
  options.stacks.cpu_hz = static_cast<uint32_t>(state.range(0));
  absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
  if (!s.ok()) return state.SkipWithError(std::string(s.status().message()).c_str());
  EventSource& source = **s;
  if (!source.stacks().cpu_sampling_refused().empty()) {
    return state.SkipWithError(source.stacks().cpu_sampling_refused().c_str());
  }
  const bool busy = state.range(1) != 0;
  if (busy && system("command -v hackbench > /dev/null") != 0) {
    return state.SkipWithError("no hackbench (rt-tests)");
  }
  const int stats_fd = EventSource::EnableKernelStats();
  if (stats_fd < 0) return state.SkipWithError("BPF_ENABLE_STATS failed");
  const auto sampler_stats = [&source] {
    for (const EventSource::ProgramStats& p : source.program_stats()) {
      if (p.name == "sample_cpu_stack") return RunStats{p.run_count, p.run_time_ns};
    }
    return RunStats{};
  };
  RunStats total;
  double seconds = 0;
  std::string error;
  for (auto _ : state) {
    if (absl::Status st = source.Attach(); !st.ok()) {
      error = std::string(st.message());
      break;
    }
    const RunStats before = sampler_stats();
    const auto t0 = std::chrono::steady_clock::now();
    // A process group of its own, which the kill below ends whole.
    const pid_t child = fork();
    if (child == 0) {
      setpgid(0, 0);
      if (busy) {
        // Until killed: hackbench runs of about a second each.
        execlp("sh", "sh", "-c", "while :; do hackbench -g 4 -l 2000 > /dev/null; done", nullptr);
      }
      pause();
      _exit(0);
    }
    if (child < 0) {
      error = "fork failed";
      break;
    }
    setpgid(child, child);
    const auto until = t0 + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      source.Poll(50, [](uint32_t, absl::Span<const RecordView>) {}).IgnoreError();
    }
    kill(-child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    // Its hackbench processes, orphans now, until init has reaped them all.
    for (int i = 0; i < 500 && kill(-child, 0) == 0; i++) usleep(10000);
    const RunStats after = sampler_stats();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    source.Detach();
    source.Drain([](uint32_t, absl::Span<const RecordView>) {});
    total.count += after.count - before.count;
    total.time_ns += after.time_ns - before.time_ns;
  }
  close(stats_fd);
  if (!error.empty()) return state.SkipWithError(error.c_str());
  state.counters["samples_per_s"] = static_cast<double>(total.count) / seconds;
  state.counters["ns_per_sample"] =
      total.count == 0 ? 0 : static_cast<double>(total.time_ns) / static_cast<double>(total.count);
  state.counters["pct_of_one_cpu"] = 100.0 * static_cast<double>(total.time_ns) / (seconds * 1e9);
}
BENCHMARK(BM_CpuSamples)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3)
    ->ArgNames({"hz", "busy"})
    ->Args({49, 0})
    ->Args({49, 1});

// BM_LoadAttach: the CPU the agent spends starting its programs (Load,
// Attach, Detach, destroy; the calling thread's user and system time) with
// the three groups as one object, against each group as its own object (the
// baseline), in alternate runs: `one_vs_each` is the median of the
// iterations' ratios, _lo and _hi their range.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void BM_LoadAttach(benchmark::State& state) {
  std::vector<double> one_ms, each_ms, ratios;
  const auto start_and_stop = [](bool one_object, double* ms) {
    EventSource::Options options;
    options.one_object = one_object;
    const double t0 = ThreadCpuMs();
    absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
    if (!s.ok() || !(*s)->Attach().ok() || (*s)->one_object() != one_object) return false;
    s->reset();
    *ms = ThreadCpuMs() - t0;
    return true;
  };
  for (auto _ : state) {
    double each = 0, one = 0;
    if (!start_and_stop(false, &each) || !start_and_stop(true, &one)) {
      return state.SkipWithError("loading the programs (both ways) failed");
    }
    each_ms.push_back(each);
    one_ms.push_back(one);
    ratios.push_back(one / each);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  state.counters["cpu_ms_each_group"] = median(each_ms);
  state.counters["cpu_ms_one_object"] = median(one_ms);
  state.counters["one_vs_each"] = median(ratios);
  state.counters["one_vs_each_lo"] = *std::min_element(ratios.begin(), ratios.end());
  state.counters["one_vs_each_hi"] = *std::max_element(ratios.begin(), ratios.end());
}
BENCHMARK(BM_LoadAttach)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(9);

}  // namespace
}  // namespace ringside::bpf

BENCHMARK_MAIN();
