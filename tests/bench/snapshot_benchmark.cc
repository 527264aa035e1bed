// What a CLONE_SNAPSHOT costs the writers, and how long it takes to land.
//
//   BM_Snapshot_WriterPause/<MiB>/0   the longest a writer waits for the lock
//                                     while a snapshot of a full buffer is
//                                     taken as TracingSession does it: a
//                                     copy-on-write clone, copied by a
//                                     CloneCopier without the lock
//   BM_Snapshot_WriterPause/<MiB>/1   the same with the whole buffer copied
//                                     under the lock (Perfetto's clone)
//   BM_Snapshot_Memcpy/<MiB>          a plain memcpy of the same size into
//                                     fresh memory (the baseline)
//   BM_Snapshot_TriggerToFile/256     wall time from the trigger to a
//                                     renamed, fsynced file of a full 256 MiB
//                                     buffer, on the path the agent takes
//
// The writer commits a 4 KiB chunk every 20 us (200 MB/s, far above what the
// agent commits) and measures, for each commit, the time from asking for the
// lock to having committed. Counters: pause_max_us (the longest wait during
// the snapshot), clone_ms (the snapshot's own time), commits (during it).
// After the usual output, a table gives the pauses beside the memcpy
// baseline of the same size (medians of the repetitions, with the spread).

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/output/output_file.h"
#include "agent/session/buffer_reader.h"
#include "agent/session/tracing_session.h"
#include "benchmark/benchmark.h"
#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/bench/bench_main.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::agent {
namespace {

using buffer::ChunkBuilder;
using buffer::ChunkID;
using buffer::TraceBuffer;

constexpr size_t kChunkSize = 4096;
constexpr size_t kPayloadSize = kChunkSize - buffer::kChunkHeaderSize;
constexpr auto kWriterPeriod = std::chrono::microseconds(20);

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A 4 KiB chunk of real packets: compact sched_switch bundles of 24 events.
ChunkBuilder MakeChunk(ChunkID id, uint64_t* ts) {
  ChunkBuilder b(id, 1);
  for (;;) {
    trace::TracePacket p;
    p.set_timestamp(*ts);
    auto* sched = p.mutable_ftrace_events()->mutable_compact_sched();
    p.mutable_ftrace_events()->set_cpu(static_cast<uint32_t>(id % 2));
    sched->add_intern_table("kworker/0:1");
    for (int i = 0; i < 24; i++) {
      sched->add_switch_timestamp(i == 0 ? *ts : 1500);
      sched->add_switch_prev_state(1);
      sched->add_switch_next_pid(1000 + i);
      sched->add_switch_next_prio(120);
      sched->add_switch_next_comm_index(0);
    }
    *ts += 24 * 1500;
    const std::string bytes = p.SerializeAsString();
    if (b.payload().size() + buffer::kFragmentHeaderSize + bytes.size() > kPayloadSize) break;
    b.AddFragment(bytes);
  }
  return b;
}

void Commit(TraceBuffer* buffer, const ChunkBuilder& b, ChunkID id) {
  buffer->CopyChunkUntrusted(1, buffer::ClientIdentity{0, 1}, b.writer_id(), id, b.num_fragments(),
                             b.flags(), true, b.payload_data(), b.payload().size());
}

// A buffer of `size` bytes, full and wrapped once, as in a long recording.
struct FullBuffer {
  explicit FullBuffer(size_t size) : buffer(TraceBuffer::Create(size)) {
    uint64_t ts = 1'000'000'000;
    chunk = MakeChunk(0, &ts);
    while (buffer->stats().write_wrap_count == 0) Commit(buffer.get(), chunk, next_id++);
  }
  std::unique_ptr<TraceBuffer> buffer;
  ChunkBuilder chunk{0, 1};
  ChunkID next_id = 0;
};

// Commits a chunk every kWriterPeriod under `mu` until stopped, keeping the
// longest wait for the lock (plus the commit) while `measuring`.
class PacedWriter {
 public:
  PacedWriter(absl::Mutex* mu, FullBuffer* full) : mu_(mu), full_(full) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PacedWriter() {
    stop_.store(true);
    thread_.join();
  }
  void StartMeasuring() {
    max_wait_ns_.store(0);
    commits_.store(0);
    measuring_.store(true);
  }
  void StopMeasuring() { measuring_.store(false); }
  int64_t max_wait_ns() const { return max_wait_ns_.load(); }
  uint64_t commits() const { return commits_.load(); }

 private:
  void Run() {
    int64_t next = NowNs();
    while (!stop_.load(std::memory_order_relaxed)) {
      while (NowNs() < next) {
      }
      next += std::chrono::nanoseconds(kWriterPeriod).count();
      const int64_t t0 = NowNs();
      {
        absl::MutexLock lock(mu_);
        Commit(full_->buffer.get(), full_->chunk, full_->next_id++);
      }
      const int64_t wait = NowNs() - t0;
      if (measuring_.load(std::memory_order_relaxed)) {
        commits_.fetch_add(1, std::memory_order_relaxed);
        if (wait > max_wait_ns_.load(std::memory_order_relaxed)) max_wait_ns_.store(wait);
      }
      // A writer that fell behind (waiting for the lock) does not burst.
      next = std::max(next, NowNs());
    }
  }

  absl::Mutex* mu_;
  FullBuffer* full_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> measuring_{false};
  std::atomic<int64_t> max_wait_ns_{0};
  std::atomic<uint64_t> commits_{0};
  std::thread thread_;
};

// Clones `buffer` as TracingSession::CloneSnapshot does; *max_hold_ns: the
// longest it held the lock; *chunks_at_clone (if given): the buffer's
// chunks_written at the clone's moment.
std::unique_ptr<TraceBuffer> CopyOnWriteClone(absl::Mutex* mu, TraceBuffer* buffer,
                                              int64_t* max_hold_ns,
                                              uint64_t* chunks_at_clone = nullptr) {
  std::unique_ptr<TraceBuffer> clone;
  std::unique_ptr<TraceBuffer::CloneCopier> copier;
  int64_t t0 = 0;
  {
    absl::MutexLock lock(mu);
    t0 = NowNs();
    if (chunks_at_clone != nullptr) *chunks_at_clone = buffer->stats().chunks_written;
    clone = buffer->BeginClone();
    copier = buffer->clone_copier();
    *max_hold_ns = std::max(*max_hold_ns, NowNs() - t0);
  }
  clone->PrefaultCloneMemory();
  // Without the lock, as the session copies.
  while (copier != nullptr && !copier->CopySome(TracingSession::kCloneStepBytes)) {
  }
  {
    absl::MutexLock lock(mu);
    t0 = NowNs();
    buffer->ContinueClone(TracingSession::kCloneStepBytes);
    *max_hold_ns = std::max(*max_hold_ns, NowNs() - t0);
  }
  return clone;
}

void BM_Snapshot_WriterPause(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0)) << 20;
  // 0: copy-on-write, 1: whole copy, 2: no snapshot, 3: no snapshot, but
  // as much fresh memory populated on another thread as a clone needs.
  const int64_t mode = state.range(1);
  FullBuffer full(size);
  absl::Mutex mu;
  PacedWriter writer(&mu, &full);
  int64_t max_wait_ns = 0, clone_ns = 0, max_hold_ns = 0;
  uint64_t commits = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // The writer's steady state.
    writer.StartMeasuring();
    const int64_t t0 = NowNs();
    std::unique_ptr<TraceBuffer> clone;
    // The buffer's chunks at the clone's moment, read under the lock.
    uint64_t chunks_at_clone = 0;
    if (mode == 1) {
      absl::MutexLock lock(&mu);
      chunks_at_clone = full.buffer->stats().chunks_written;
      clone = full.buffer->CloneReadOnly();
      max_hold_ns = std::max(max_hold_ns, NowNs() - t0);
    } else if (mode == 0) {
      clone = CopyOnWriteClone(&mu, full.buffer.get(), &max_hold_ns, &chunks_at_clone);
    } else if (mode == 3) {
      // What populating fresh memory costs the writer by itself, lock or
      // no lock (on a virtual machine the host backs each new page).
      void* fresh = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (fresh == MAP_FAILED) {
        state.SkipWithError("mmap failed");
        break;
      }
#ifdef MADV_POPULATE_WRITE
      for (size_t off = 0; off < size; off += 4 << 20) {
        madvise(static_cast<char*>(fresh) + off, 4 << 20, MADV_POPULATE_WRITE);
      }
#endif
      state.PauseTiming();
      munmap(fresh, size);
      state.ResumeTiming();
    } else {
      // The writer's own noise floor: as long as a snapshot of this size
      // takes, with none taken.
      std::this_thread::sleep_for(std::chrono::milliseconds(size >> 22));
    }
    clone_ns += NowNs() - t0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // Let a waiting commit land.
    writer.StopMeasuring();
    max_wait_ns = std::max(max_wait_ns, writer.max_wait_ns());
    commits += writer.commits();
    // The clone holds the buffer as it was at its moment, whole. (Compared
    // with the live buffer's count, as it was before, it failed whenever
    // the writer had not committed again within the 5 ms: a loaded machine
    // after a 1 GiB copy under the lock.)
    if (mode < 2 && (clone == nullptr || !clone->clone_complete() ||
                     clone->stats().chunks_written != chunks_at_clone)) {
      // Out of the loop at once: Google Benchmark CHECK-fails a
      // PauseTiming() or ResumeTiming() after SkipWithError().
      state.SkipWithError("the clone is not the buffer as it was");
      break;
    }
    state.PauseTiming();
    clone.reset();  // Unmapping 1 GiB is not the snapshot's cost.
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["pause_max_us"] = static_cast<double>(max_wait_ns) / 1e3;
  state.counters["hold_max_us"] = static_cast<double>(max_hold_ns) / 1e3;
  state.counters["clone_ms"] = static_cast<double>(clone_ns) / 1e6 / n;
  state.counters["commits"] = static_cast<double>(commits) / n;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_Snapshot_WriterPause)
    ->ArgsProduct({{64, 256, 1024}, {0, 1, 2, 3}})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Snapshot_Memcpy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0)) << 20;
  std::vector<uint8_t> source(size, 's');
  for (auto _ : state) {
    void* dst = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memcpy(dst, source.data(), size);
    benchmark::DoNotOptimize(dst);
    munmap(dst, size);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_Snapshot_Memcpy)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The agent's path from a trigger to the file, without the stop delay: the
// copy-on-write clone, every packet read out of it, written to a temporary
// file in batches, fsynced and renamed. The directory is under $TMPDIR.
void BM_Snapshot_TriggerToFile(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0)) << 20;
  FullBuffer full(size);
  absl::Mutex mu;
  PacedWriter writer(&mu, &full);
  const char* tmp = getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/ringside-bench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    state.SkipWithError("cannot make a directory under $TMPDIR");
    return;
  }
  const std::string path = dir + "/snapshot.pftrace";
  uint64_t bytes = 0;
  for (auto _ : state) {
    int64_t max_hold_ns = 0;
    std::unique_ptr<TraceBuffer> clone = CopyOnWriteClone(&mu, full.buffer.get(), &max_hold_ns);
    absl::StatusOr<std::unique_ptr<OutputFile>> file =
        OutputFile::Open(path, OutputFile::Mode::kWholeFile, size + (size >> 2));
    if (!file.ok()) {
      state.SkipWithError(std::string(file.status().message()).c_str());
      break;
    }
    std::string out;
    BufferPacketReader reader;
    absl::Status st =
        reader.WriteInto({clone.get()}, &out, file->get(), SessionSnapshot::kWriteBatchBytes);
    if (st.ok()) st = (*file)->Write(out);
    if (st.ok()) st = (*file)->Finish();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
    bytes = (*file)->bytes_written();
    state.PauseTiming();
    clone.reset();
    unlink(path.c_str());
    state.ResumeTiming();
  }
  rmdir(dir.c_str());
  state.counters["file_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Snapshot_TriggerToFile)
    ->Arg(256)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Prints the usual console output, then the writers' pause of each design
// beside the memcpy of the same size.
class PauseReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Aggregate) continue;
      const std::string name = run.run_name.str();
      if (run.aggregate_name == "median") {
        median_[name] = run.counters;
        median_ms_[name] = run.GetAdjustedRealTime();
      } else if (run.aggregate_name == "stddev") {
        stddev_[name] = run.counters;
        stddev_ms_[name] = run.GetAdjustedRealTime();
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    char line[320];
    out << "\nWriters' pause during a snapshot of a full buffer (medians of the repetitions,"
           " +- stddev)\n"
           "  pause: the longest a writer waited for the lock and committed; hold: the longest\n"
           "  the snapshot held the lock; idle: the writer's longest commit with no snapshot;\n"
           "  populate: the same while another thread populates as much fresh memory as the\n"
           "  clone (no lock taken: the machine's own cost of new pages)\n";
    for (const char* mib : {"64", "256", "1024"}) {
      auto name = [&](const char* prefix, const char* mode) {
        return std::string(prefix) + mib + mode + "/iterations:3/real_time";
      };
      const std::string cow = name("BM_Snapshot_WriterPause/", "/0");
      const std::string copy = name("BM_Snapshot_WriterPause/", "/1");
      const std::string idle = name("BM_Snapshot_WriterPause/", "/2");
      const std::string populate = name("BM_Snapshot_WriterPause/", "/3");
      const std::string base = name("BM_Snapshot_Memcpy/", "");
      if (!median_.count(cow) || !median_.count(copy) || !median_.count(idle) ||
          !median_.count(populate) || !median_ms_.count(base)) {
        continue;
      }
      std::snprintf(line, sizeof(line),
                    "  %4s MiB copy-on-write: pause %7.0f us (+-%.0f) hold %5.0f us (+-%.0f), "
                    "clone %4.0f ms | idle pause %5.0f us | populate pause %6.0f us (+-%.0f) | "
                    "whole copy: pause %8.0f us | memcpy %6.1f ms | cow hold / memcpy %.5f\n",
                    mib, median_[cow]["pause_max_us"].value, stddev_[cow]["pause_max_us"].value,
                    median_[cow]["hold_max_us"].value, stddev_[cow]["hold_max_us"].value,
                    median_[cow]["clone_ms"].value, median_[idle]["pause_max_us"].value,
                    median_[populate]["pause_max_us"].value,
                    stddev_[populate]["pause_max_us"].value, median_[copy]["pause_max_us"].value,
                    median_ms_[base], median_[cow]["hold_max_us"].value / (median_ms_[base] * 1e3));
      out << line;
    }
    for (const auto& [name, ms] : median_ms_) {
      if (name.rfind("BM_Snapshot_TriggerToFile", 0) != 0) continue;
      std::snprintf(line, sizeof(line), "  trigger to renamed file, %s: %.0f ms (+-%.0f)\n",
                    name.c_str(), ms, stddev_ms_[name]);
      out << line;
    }
  }

 private:
  std::map<std::string, benchmark::UserCounters> median_, stddev_;
  std::map<std::string, double> median_ms_, stddev_ms_;
};

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  ringside::agent::PauseReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
