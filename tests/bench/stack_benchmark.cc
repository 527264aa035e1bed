// The agent's CPU per stack sample: StackSampleWriter with the real frame
// namer (kernel addresses through /proc/kallsyms, user ones through
// /proc/PID/maps and the binaries' ELF symbols), on CPU samples shaped like
// a fork-heavy workload's (hackbench's workers): `processes` processes
// forked from one parent, each sampled in the same few stacks, as the BPF
// reader hands them over. Each repetition starts with a fresh namer and
// writer (not timed: loading kallsyms), so its figure holds the first
// naming of every process's stacks, which is what a workload of new
// processes costs.
//
// The user frames are return addresses inside this binary's own functions,
// the parent is this process (its maps and binary are real), and the
// children are fork records of made-up pids that share its maps. The
// kernel frames are addresses of functions in /proc/kallsyms (zeros
// without root: then unnamed, and the figure says less).
//
//   ns_per_sample  thread CPU time per sample written (median of the runs)

#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/stack_sample_writer.h"
#include "agent/sources/system_frame_namer.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "benchmark/benchmark.h"
#include "bpf/process_events.h"
#include "bpf/records.h"
#include "bpf/stack_events.h"
#include "tests/bench/bench_main.h"

namespace ringside::agent {
namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Functions of this binary whose addresses stand for user frames.
__attribute__((noinline)) int UserLeaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int UserMiddle(int x) { return UserLeaf(x) + 2; }
__attribute__((noinline)) int UserLoop(int x) { return UserMiddle(x) * 5; }
__attribute__((noinline)) int UserMain(int x) { return UserLoop(x) - 7; }

// Addresses of a few kernel functions a worker's stacks pass through.
std::vector<uint64_t> KernelAddresses() {
  static const char* const kWanted[] = {
      "__schedule", "schedule",      "pipe_read",           "vfs_read",
      "ksys_read",  "do_syscall_64", "unix_stream_sendmsg", "sock_write_iter",
      "vfs_write"};
  std::vector<uint64_t> out;
  std::ifstream in("/proc/kallsyms");
  std::string line;
  while (std::getline(in, line) && out.size() < std::size(kWanted)) {
    std::istringstream fields(line);
    std::string address, type, name;
    fields >> address >> type >> name;
    for (const char* w : kWanted) {
      if (name == w) out.push_back(std::stoull(address, nullptr, 16));
    }
  }
  return out;
}

// One CPU sample record of `tgid`: its kernel frames then its user frames,
// innermost first, as the BPF program writes them.
std::vector<uint64_t> Sample(uint64_t ts, int32_t tgid, const std::vector<uint64_t>& kernel,
                             const std::vector<uint64_t>& user) {
  std::vector<uint64_t> w(sizeof(rs_stack_cpu_sample) / 8 + kernel.size() + user.size(), 0);
  auto* r = reinterpret_cast<rs_stack_cpu_sample*>(w.data());
  r->h.type = RS_EV_STACK_CPU_SAMPLE;
  r->h.size = static_cast<uint16_t>(w.size() * 8);
  r->h.cpu = 0;
  r->h.ts_ns = ts;
  r->pid = tgid;
  r->tgid = tgid;
  r->kernel_frames = static_cast<uint16_t>(kernel.size());
  r->user_frames = static_cast<uint16_t>(user.size());
  r->kernel_status = RS_STACK_TAKEN;
  r->user_status = RS_STACK_TAKEN;
  std::memcpy(&w[sizeof(rs_stack_cpu_sample) / 8], kernel.data(), kernel.size() * 8);
  std::memcpy(&w[sizeof(rs_stack_cpu_sample) / 8 + kernel.size()], user.data(), user.size() * 8);
  return w;
}

std::vector<uint64_t> Fork(uint64_t ts, int32_t parent, int32_t child) {
  std::vector<uint64_t> w((sizeof(rs_process_fork) + 7) / 8, 0);
  auto* f = reinterpret_cast<rs_process_fork*>(w.data());
  f->h.type = RS_EV_PROCESS_FORK;
  f->h.size = static_cast<uint16_t>(w.size() * 8);
  f->h.ts_ns = ts;
  f->parent_pid = f->parent_tgid = parent;
  f->child_pid = f->child_tgid = child;
  return w;
}

void BM_StackSamples(benchmark::State& state) {
  const int processes = static_cast<int>(state.range(0));
  constexpr int kStacks = 4;           // Distinct stacks a process is sampled in.
  constexpr int kSamplesPerStack = 4;  // Times each is sampled.
  const std::vector<uint64_t> kernel = KernelAddresses();
  const uint64_t fn[] = {
      reinterpret_cast<uint64_t>(&UserLeaf), reinterpret_cast<uint64_t>(&UserMiddle),
      reinterpret_cast<uint64_t>(&UserLoop), reinterpret_cast<uint64_t>(&UserMain)};
  // Stack s: innermost in function s, then return addresses in the callers.
  std::vector<std::vector<uint64_t>> user_stacks, kernel_stacks;
  for (int s = 0; s < kStacks; s++) {
    std::vector<uint64_t> u = {fn[s] + 4};
    for (int c = s + 1; c < 4; c++) u.push_back(fn[c] + 9);
    user_stacks.push_back(u);
    std::vector<uint64_t> k;
    for (size_t i = static_cast<size_t>(s); i < kernel.size(); i++) k.push_back(kernel[i] + 16);
    kernel_stacks.push_back(k);
  }
  // The records of one pass: the parent's samples, then each child's fork
  // and samples, as a reader hands them over.
  const int32_t parent = getpid();
  std::vector<std::vector<uint64_t>> words;
  uint64_t ts = 1'000'000'000;
  for (int p = 0; p <= processes; p++) {
    const int32_t tgid = p == 0 ? parent : 4'000'000 + p;
    if (p > 0) words.push_back(Fork(ts++, parent, tgid));
    for (int n = 0; n < kSamplesPerStack; n++) {
      for (int s = 0; s < kStacks; s++) {
        words.push_back(Sample(ts++, tgid, kernel_stacks[s], user_stacks[s]));
      }
    }
  }
  std::vector<bpf::Record> records;
  uint64_t samples = 0;
  for (const std::vector<uint64_t>& w : words) {
    const auto* h = reinterpret_cast<const rs_event_header*>(w.data());
    records.push_back({h->type, w.data()});
    samples += h->type == RS_EV_STACK_CPU_SAMPLE;
  }
  int64_t cpu_ns = 0;
  uint64_t written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ProducerBuffer::Options options;
    options.num_chunks = 1024;
    ProducerBuffer producer(1, buffer::ClientIdentity{0, 1}, options);
    std::unique_ptr<TraceWriter> trace_writer = producer.CreateTraceWriter(1);
    DescriptorTracker tracker;
    // Not preloading this binary, whose frames stand for a workload's here:
    // their first naming is what the figure is of.
    std::unique_ptr<FrameNamer> namer = MakeSystemFrameNamer("/proc", false);
    StackSampleWriter::Config config;
    config.producer = 1;
    config.writer = 1;
    config.cpu_hz = 99;
    StackSampleWriter writer(config, trace_writer.get(), &tracker, namer.get());
    state.ResumeTiming();
    const int64_t t0 = ThreadCpuNs();
    writer.Write(records);
    cpu_ns += ThreadCpuNs() - t0;
    written += writer.stats().cpu_samples;
  }
  if (written != samples * state.iterations()) {
    return state.SkipWithError("the writer wrote another number of samples than given");
  }
  state.SetItemsProcessed(static_cast<int64_t>(written));
  state.counters["ns_per_sample"] = static_cast<double>(cpu_ns) / static_cast<double>(written);
}
BENCHMARK(BM_StackSamples)
    ->Unit(benchmark::kMillisecond)
    ->ArgName("processes")
    ->Arg(1)
    ->Arg(64)
    ->Iterations(10);

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  benchmark::ConsoleReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
