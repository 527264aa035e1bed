// The agent's CPU per sched event, stage by stage, from a BPF record to the
// bytes of the file, on records shaped like a pipe storm's (a wakeup and a
// switch per hop, now and then a migration), without the kernel: what
// `record_benchmark` measures as one figure, taken apart.
//
//   encode  BpfBundleWriter: a batch of records of one CPU into one
//           FtraceEventBundle packet, written by a TraceWriter into chunks
//           handed to the ProducerBuffer's queue (the source's reader thread)
//   commit  ProducerBuffer::CommitQueuedInto: the chunks copied into the
//           TraceBuffer (the buffer-owner thread)
//   read    BufferPacketReader: the packets read out of the TraceBuffer and
//           framed for the file, counting the events by CPU and kind for the
//           loss accounting (the drain, under the buffers' lock)
//   memcpy  the same records copied once: the floor any consumer pays
//
// Each stage's figure is thread CPU time per event; the printout after the
// usual output gives each as a share of the whole and a ratio to memcpy.

#include <time.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/session/buffer_reader.h"
#include "agent/sources/bpf_bundle_writer.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "benchmark/benchmark.h"
#include "bpf/sched_events.h"
#include "buffer/trace_buffer.h"
#include "tests/bench/bench_main.h"

namespace ringside::agent {
namespace {

constexpr int kCpus = 2;
constexpr size_t kRecordsPerCpu = 64 * 1024;
// What the BPF source's reader hands the bundle writer per poll of a busy
// ring: a few hundred records.
constexpr size_t kBatch = 256;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SetComm(char* comm, const char* name) {
  std::memset(comm, 0, RS_TASK_COMM_LEN);
  std::strncpy(comm, name, RS_TASK_COMM_LEN - 1);
}

// The records of one CPU, back to back as the ring holds them: two pairs of
// storm processes taking turns with each other and the idle task.
std::vector<uint8_t> StormRecords(uint32_t cpu, uint64_t* count) {
  std::vector<uint8_t> bytes;
  uint64_t ts = 1'000'000'000'000 + cpu;
  const int32_t pids[] = {4101, 4102, 4103, 4104, 0};
  for (size_t i = 0; bytes.size() < kRecordsPerCpu * sizeof(rs_sched_switch); i++) {
    const int32_t prev = pids[i % 5], next = pids[(i + 1) % 5];
    if (next != 0) {
      rs_sched_wakeup w{};
      w.h = {RS_EV_SCHED_WAKING, sizeof(w), cpu, ts += 700};
      w.pid = w.tgid = next;
      w.prio = 120;
      w.target_cpu = static_cast<int32_t>(cpu);
      w.waker_pid = w.waker_tgid = prev;
      SetComm(w.comm, "storm-pipe");
      bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&w), reinterpret_cast<uint8_t*>(&w + 1));
      (*count)++;
    }
    rs_sched_switch s{};
    s.h = {RS_EV_SCHED_SWITCH, sizeof(s), cpu, ts += 900};
    s.prev_pid = s.prev_tgid = prev;
    s.next_pid = s.next_tgid = next;
    s.prev_prio = s.next_prio = 120;
    s.prev_state = prev == 0 ? 0 : 1;
    SetComm(s.prev_comm, prev == 0 ? "swapper/0" : "storm-pipe");
    SetComm(s.next_comm, next == 0 ? "swapper/0" : "storm-pipe");
    bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&s), reinterpret_cast<uint8_t*>(&s + 1));
    (*count)++;
    if (i % 64 == 63) {
      rs_sched_migrate m{};
      m.h = {RS_EV_SCHED_MIGRATE, sizeof(m), cpu, ts += 300};
      m.pid = m.tgid = next == 0 ? pids[0] : next;
      m.prio = 120;
      m.orig_cpu = static_cast<int32_t>(cpu);
      m.dest_cpu = static_cast<int32_t>(cpu ^ 1);
      SetComm(m.comm, "storm-pipe");
      bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&m), reinterpret_cast<uint8_t*>(&m + 1));
      (*count)++;
    }
  }
  return bytes;
}

// Cuts a CPU's record bytes into batches of views, as the ring reader does.
std::vector<std::vector<bpf::RecordView>> Batches(const std::vector<uint8_t>& bytes) {
  std::vector<std::vector<bpf::RecordView>> batches(1);
  for (size_t off = 0; off < bytes.size();) {
    const auto* h = reinterpret_cast<const rs_event_header*>(bytes.data() + off);
    if (batches.back().size() == kBatch) batches.emplace_back();
    batches.back().push_back({h, h->size});
    off += h->size;
  }
  return batches;
}

void BM_Pipeline(benchmark::State& state) {
  uint64_t records_per_pass = 0;
  std::vector<std::vector<uint8_t>> cpu_bytes;
  std::vector<std::vector<std::vector<bpf::RecordView>>> cpu_batches;
  for (uint32_t cpu = 0; cpu < kCpus; cpu++) {
    cpu_bytes.push_back(StormRecords(cpu, &records_per_pass));
    cpu_batches.push_back(Batches(cpu_bytes.back()));
  }
  ProducerBuffer::Options options;
  options.num_chunks = 1024;
  ProducerBuffer producer(1, buffer::ClientIdentity{0, 1}, options);
  std::vector<std::unique_ptr<TraceWriter>> writers;
  for (uint32_t cpu = 0; cpu < kCpus; cpu++) {
    writers.push_back(producer.CreateTraceWriter(static_cast<buffer::WriterID>(cpu + 1)));
  }
  // Populated, as a session's buffers are (SessionBuffers): without it the
  // commit stage would be mostly the first fault of each page it writes.
  std::unique_ptr<buffer::TraceBuffer> buffer = buffer::TraceBuffer::Create(256 << 20);
  buffer->Populate();  // Where it cannot, a session goes on without: so does this.
  BpfBundleWriter bundles;
  BufferPacketReader reader;
  std::string out, copy;
  out.reserve(64 << 20);
  copy.resize(cpu_bytes[0].size() + cpu_bytes[1].size());
  int64_t encode_ns = 0, commit_ns = 0, read_ns = 0, memcpy_ns = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    const size_t batches = cpu_batches[0].size();
    for (size_t b = 0; b < batches; b++) {
      int64_t t0 = ThreadCpuNs();
      for (uint32_t cpu = 0; cpu < kCpus; cpu++) {
        if (b >= cpu_batches[cpu].size()) continue;
        bundles.WriteBundle(writers[cpu].get(), cpu, cpu_batches[cpu][b], false);
      }
      int64_t t1 = ThreadCpuNs();
      producer.CommitQueuedInto(buffer.get());
      int64_t t2 = ThreadCpuNs();
      encode_ns += t1 - t0;
      commit_ns += t2 - t1;
    }
    for (auto& w : writers) w->Flush();
    int64_t t0 = ThreadCpuNs();
    producer.CommitQueuedInto(buffer.get());
    int64_t t1 = ThreadCpuNs();
    out.clear();
    reader.ReadInto({buffer.get()}, &out);
    int64_t t2 = ThreadCpuNs();
    size_t off = 0;
    for (const auto& bytes : cpu_bytes) {
      std::memcpy(copy.data() + off, bytes.data(), bytes.size());
      off += bytes.size();
    }
    benchmark::DoNotOptimize(copy.data());
    int64_t t3 = ThreadCpuNs();
    commit_ns += t1 - t0;
    read_ns += t2 - t1;
    memcpy_ns += t3 - t2;
    events += records_per_pass;
    benchmark::DoNotOptimize(out.data());
  }
  if (reader.events() != events) {
    return state.SkipWithError("the file's events are not the records written");
  }
  const double n = static_cast<double>(events);
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["ns_encode"] = static_cast<double>(encode_ns) / n;
  state.counters["ns_commit"] = static_cast<double>(commit_ns) / n;
  state.counters["ns_read"] = static_cast<double>(read_ns) / n;
  state.counters["ns_memcpy"] = static_cast<double>(memcpy_ns) / n;
  state.counters["ns_total"] = static_cast<double>(encode_ns + commit_ns + read_ns) / n;
  // The ratio within this repetition, whose memcpy ran beside its pipeline:
  // its median over the repetitions moves less with the machine's memory
  // bandwidth of the moment than the ratio of the two medians does.
  if (memcpy_ns > 0) {
    state.counters["x_memcpy"] =
        static_cast<double>(encode_ns + commit_ns + read_ns) / static_cast<double>(memcpy_ns);
  }
  state.counters["file_bytes_per_event"] =
      static_cast<double>(out.size()) / static_cast<double>(records_per_pass);
}
BENCHMARK(BM_Pipeline)->Unit(benchmark::kMillisecond)->Iterations(20);

// Prints the usual console output, then the stages' shares and ratios.
class StageReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "cv") {
        const auto x = run.counters.find("x_memcpy");
        if (x != run.counters.end()) x_memcpy_cv_ = x->second.value;
        continue;
      }
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      for (const auto& [name, counter] : run.counters) stages_[name] = counter.value;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    if (!stages_.count("ns_total") || stages_["ns_total"] <= 0) return;
    auto& out = GetOutputStream();
    const double total = stages_["ns_total"], floor = stages_["ns_memcpy"];
    out << "\nAgent CPU per sched event, by stage (medians of the same run)\n";
    char line[160];
    for (const char* stage : {"encode", "commit", "read"}) {
      const double ns = stages_[std::string("ns_") + stage];
      std::snprintf(line, sizeof(line), "  %-8s %7.1f ns  %5.1f%%  %6.1fx memcpy\n", stage, ns,
                    100 * ns / total, floor > 0 ? ns / floor : 0);
      out << line;
    }
    std::snprintf(line, sizeof(line),
                  "  %-8s %7.1f ns  = %.3f CPU s per million events  %6.1fx memcpy (%.1f ns)\n",
                  "total", total, total / 1000, floor > 0 ? total / floor : 0, floor);
    out << line;
    if (stages_.count("x_memcpy")) {
      std::snprintf(line, sizeof(line),
                    "  total / memcpy within each repetition: median %.2fx (cv %.0f%%)\n",
                    stages_["x_memcpy"], 100 * x_memcpy_cv_);
      out << line;
    }
  }

 private:
  std::map<std::string, double> stages_;
  double x_memcpy_cv_ = 0;
};

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  ringside::agent::StageReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
