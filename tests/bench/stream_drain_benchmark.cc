// What the agent's streaming drain (write_into_file) costs: its CPU per MB
// written, and the writers' added wait while it runs (issue 18).
//
//   BM_StreamDrain_Throughput     a drain period's new data (4 MiB of sched
//                                 bundles) read out of a wrapped 64 MiB buffer
//                                 with BufferPacketReader::ReadSome in 1 MiB
//                                 batches and written
//                                 into a RotatingTraceFile (16 MiB files, 2
//                                 kept), as SessionStream::WriteIntoFile does;
//                                 16 periods (64 MiB) an iteration
//   BM_StreamDrain_PlainWrite/0   write() of as many bytes, 4 MiB at a time,
//                                 into one file of the same directory (fsynced
//                                 and emptied between iterations, untimed)
//   BM_StreamDrain_PlainWrite/1   the same, fsynced and a new file begun every
//                                 16 MiB, as rotation does
//   BM_StreamDrain_Memcpy         memcpy of as many bytes, 4 MiB at a time
//   BM_StreamDrain_WriterPause/0  a writer's waits for the lock while the
//                                 buffer is drained every 250 ms as the
//                                 session does: 1 MiB batches read under the
//                                 lock (ReadSome), written outside it
//   BM_StreamDrain_WriterPause/1  the same writer with no drain (the baseline)
//
// Counters: cpu_ns_per_MB (this thread's CPU time, user and system, per 10^6
// bytes of file; the kernel's writeback threads are not in it), split into
// read_ and write_; for the writer: pause_max_us, pause_p99_us and
// pause_p999_us (its waits for the lock plus the commit, over a 2 s window),
// waited_ms (all of them added up: how long it could not commit),
// hold_max_us (the drain's longest hold of the lock), drain_MiB (read per
// drain), write_max_ms (the longest file write of a drain, outside the lock)
// and lost_MiB (overwritten before a drain read it).
//
// The writer commits a 4 KiB chunk every 20 us (200 MB/s, far above what the
// agent commits), so a drain every 250 ms reads ~50 MB under the lock; the
// hold grows with what a drain reads (the agent's default period is 5 s).
// It stands for whatever else takes the session's lock (a snapshot's clone,
// status, and the buffer owner's moves of chunks into the buffers, which the
// producers' chunk pools wait for: the drain has a thread of its own
// (TracingSession::DrainLoop), so only its holds of the lock, not its file
// writes (write_max_ms), delay them. The
// files are cut between packets at 16 MiB as the session cuts them, without
// the preamble and trailer the session adds to each (a few KiB). The scratch
// directory is under $TMPDIR (else /tmp) and is removed at the end. After the
// usual output, a table gives the drain beside its baselines (medians of the
// repetitions, with the spread).

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/output/rotating_trace_file.h"
#include "agent/session/buffer_reader.h"
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

constexpr size_t kBufferBytes = 64 << 20;
constexpr size_t kChunkBytes = 4096;
constexpr size_t kPayloadBytes = kChunkBytes - buffer::kChunkHeaderSize;
// What one drain period brings in the throughput benchmark.
constexpr size_t kPeriodBytes = 4 << 20;
constexpr int kPeriodsPerIteration = 16;
constexpr uint64_t kFileBytes = 16 << 20;
// As SessionStream::WriteIntoFile: what a drain reads per hold of the lock.
constexpr size_t kDrainBatchBytes = 1 << 20;
constexpr uint32_t kMaxFiles = 2;
constexpr int kWriters = 4;  // Sequences, as per-CPU writers.
constexpr int kChunkVariants = 64;

constexpr int64_t kWriterPeriodNs = 20'000;
constexpr auto kDrainPeriod = std::chrono::milliseconds(250);
constexpr int kDrainsPerWindow = 8;
// Room for every wait of a window at the writer's pace, and then some.
constexpr size_t kMaxWaits = 1 << 20;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A directory of the benchmark's own, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = getenv("TMPDIR");
    path_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/ringside-drain-bench-XXXXXX";
    if (mkdtemp(path_.data()) == nullptr) path_.clear();
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    std::vector<std::string> names;
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
          names.push_back(e->d_name);
        }
      }
      closedir(d);
    }
    for (const std::string& name : names) unlink((path_ + "/" + name).c_str());
    rmdir(path_.c_str());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A packet as the agent's sched writers make them: a compact_sched bundle of
// a few switches and wakings on one CPU, 100..300 bytes.
std::string SchedBundle(std::mt19937* rng, uint64_t* ts) {
  trace::TracePacket packet;
  packet.set_timestamp(*ts);
  auto* bundle = packet.mutable_ftrace_events();
  bundle->set_cpu((*rng)() % 8);
  auto* sched = bundle->mutable_compact_sched();
  const uint32_t comms = 1 + (*rng)() % 3;
  for (uint32_t c = 0; c < comms; c++) {
    sched->add_intern_table(absl::StrCat("worker-", (*rng)() % 100, "/", c));
  }
  const int switches = 4 + static_cast<int>((*rng)() % 14);
  uint64_t t = *ts;
  for (int i = 0; i < switches; i++) {
    const uint64_t delta = 300 + (*rng)() % 20'000;
    sched->add_switch_timestamp(i == 0 ? t : delta);
    t += delta;
    sched->add_switch_prev_state((*rng)() % 3);
    sched->add_switch_next_pid(static_cast<int32_t>(100 + (*rng)() % 40'000));
    sched->add_switch_next_prio(100 + static_cast<int32_t>((*rng)() % 40));
    sched->add_switch_next_comm_index((*rng)() % comms);
    if (i % 3 == 0) {
      sched->add_waking_timestamp(i == 0 ? t : delta);
      sched->add_waking_pid(static_cast<int32_t>(100 + (*rng)() % 40'000));
      sched->add_waking_target_cpu(static_cast<int32_t>((*rng)() % 8));
      sched->add_waking_prio(120);
      sched->add_waking_comm_index((*rng)() % comms);
    }
  }
  *ts = t;
  return packet.SerializeAsString();
}

// Full 4 KiB chunks of sched bundles, committed round robin on kWriters
// sequences with their chunk ids in order. Built once: building packets is
// the writers' cost, not the drain's.
class ChunkSource {
 public:
  explicit ChunkSource(uint32_t seed) {
    std::mt19937 rng(seed);
    uint64_t ts = 1'000'000'000;
    for (int v = 0; v < kChunkVariants; v++) {
      ChunkBuilder chunk(0, 0);
      for (;;) {
        const std::string packet = SchedBundle(&rng, &ts);
        if (chunk.payload().size() + buffer::kFragmentHeaderSize + packet.size() > kPayloadBytes) {
          break;
        }
        chunk.AddFragment(packet);
        packet_bytes_ += packet.size();
        packets_++;
      }
      chunks_.push_back(std::move(chunk));
    }
  }

  // Commits the next chunk; returns its payload's size.
  size_t CommitNext(TraceBuffer* buffer) {
    const ChunkBuilder& chunk = chunks_[next_ % chunks_.size()];
    const int writer = static_cast<int>(next_ % kWriters);
    next_++;
    buffer->CopyChunkUntrusted(1, buffer::ClientIdentity{0, 1},
                               static_cast<buffer::WriterID>(1 + writer), chunk_ids_[writer]++,
                               chunk.num_fragments(), chunk.flags(), true, chunk.payload_data(),
                               chunk.payload().size());
    return chunk.payload().size();
  }
  void CommitBytes(TraceBuffer* buffer, size_t bytes) {
    for (size_t done = 0; done < bytes;) done += CommitNext(buffer);
  }

  double mean_packet_bytes() const {
    return static_cast<double>(packet_bytes_) / static_cast<double>(packets_);
  }

 private:
  std::vector<ChunkBuilder> chunks_;
  ChunkID chunk_ids_[kWriters] = {};
  uint64_t next_ = 0;
  uint64_t packet_bytes_ = 0;
  uint64_t packets_ = 0;
};

// Bytes of the whole framed packets (tag, varint length, packet) at the
// start of `data` that fit in `room`.
size_t WholeFramedPackets(absl::string_view data, uint64_t room) {
  size_t end = 0;
  while (end < data.size()) {
    size_t at = end + 1;  // Past the tag.
    uint64_t length = 0;
    for (int shift = 0; at < data.size() && shift < 64; shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(data[at++]);
      length |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) break;
    }
    if (at + length > room) break;
    end = at + length;
  }
  return end;
}

// Writes a drain's packets into `file` as SessionStream::StreamOut does:
// a new file when the next packet would take the current one past
// kFileBytes, each write a copy of its part (the session's substr).
absl::Status WriteRotating(RotatingTraceFile* file, const std::string& data) {
  absl::string_view rest = data;
  while (!rest.empty()) {
    const uint64_t written = file->bytes_written();
    size_t n = rest.size();
    if (written + n > kFileBytes) n = WholeFramedPackets(rest, kFileBytes - written);
    if (n == 0 && written == 0) return absl::InternalError("a packet larger than a file");
    if (n > 0) {
      if (absl::Status st = file->Write(std::string(rest.substr(0, n))); !st.ok()) return st;
      rest.remove_prefix(n);
    }
    if (!rest.empty()) {
      if (absl::Status st = file->NextFile(); !st.ok()) return st;
    }
  }
  return file->FileDue() ? file->NextFile() : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RotatingTraceFile>> OpenStream(const std::string& dir) {
  RotatingTraceFile::Options options;
  options.dir = dir;
  options.hostname = "drain-bench";
  options.max_file_bytes = kFileBytes;
  options.max_files = kMaxFiles;
  return RotatingTraceFile::Open(std::move(options));
}

void SetCpuCounters(benchmark::State& state, int64_t read_cpu_ns, int64_t write_cpu_ns,
                    uint64_t bytes) {
  const double mb = static_cast<double>(bytes) / 1e6;
  state.counters["cpu_ns_per_MB"] = static_cast<double>(read_cpu_ns + write_cpu_ns) / mb;
  state.counters["read_cpu_ns_per_MB"] = static_cast<double>(read_cpu_ns) / mb;
  state.counters["write_cpu_ns_per_MB"] = static_cast<double>(write_cpu_ns) / mb;
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_StreamDrain_Throughput(benchmark::State& state) {
  ScratchDir dir;
  if (dir.path().empty()) return state.SkipWithError("cannot make a directory under $TMPDIR");
  absl::StatusOr<std::unique_ptr<RotatingTraceFile>> file = OpenStream(dir.path());
  if (!file.ok()) return state.SkipWithError(std::string(file.status().message()).c_str());
  std::unique_ptr<TraceBuffer> buffer = TraceBuffer::Create(kBufferBytes);
  ChunkSource chunks(1);
  BufferPacketReader reader;
  {
    // A long stream's steady state: the ring wrapped, everything read.
    chunks.CommitBytes(buffer.get(), kBufferBytes + kPeriodBytes);
    std::string out;
    reader.ReadInto({buffer.get()}, &out);
  }
  const uint64_t lost_before = buffer->stats().bytes_overwritten;
  const uint64_t files_before = (*file)->stats().files_finished;
  int64_t read_cpu_ns = 0, write_cpu_ns = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    for (int period = 0; period < kPeriodsPerIteration; period++) {
      state.PauseTiming();
      chunks.CommitBytes(buffer.get(), kPeriodBytes);
      state.ResumeTiming();
      // In batches, as the session reads (no write between them here, as
      // in the agent, whose drain runs on the thread that commits).
      for (bool all_read = false; !all_read;) {
        const int64_t t0 = ThreadCpuNs();
        std::string out;
        all_read = reader.ReadSome({buffer.get()}, &out, kDrainBatchBytes);
        const int64_t t1 = ThreadCpuNs();
        const absl::Status st = WriteRotating(file->get(), out);
        write_cpu_ns += ThreadCpuNs() - t1;
        read_cpu_ns += t1 - t0;
        bytes += out.size();
        if (!st.ok()) return state.SkipWithError(std::string(st.message()).c_str());
      }
    }
  }
  if (buffer->stats().bytes_overwritten != lost_before) {
    return state.SkipWithError("the drain lost data: it read less than was committed");
  }
  SetCpuCounters(state, read_cpu_ns, write_cpu_ns, bytes);
  state.counters["files"] = static_cast<double>((*file)->stats().files_finished - files_before) /
                            static_cast<double>(state.iterations());
  state.counters["packet_bytes"] = chunks.mean_packet_bytes();
}
BENCHMARK(BM_StreamDrain_Throughput)->Iterations(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Writes `size` bytes of `data` to `fd`; false on an error.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void BM_StreamDrain_PlainWrite(benchmark::State& state) {
  const bool rotate = state.range(0) == 1;
  ScratchDir dir;
  if (dir.path().empty()) return state.SkipWithError("cannot make a directory under $TMPDIR");
  const std::string data(kPeriodBytes, 'w');
  int seq = 0;
  auto open_next = [&] {
    // Three names in turn: the file from three rotations back is replaced.
    const std::string path = absl::StrCat(dir.path(), "/plain-", seq++ % 3);
    return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  };
  int fd = open_next();
  if (fd < 0) return state.SkipWithError("cannot create a file in the scratch directory");
  int64_t cpu_ns = 0;
  uint64_t bytes = 0, in_file = 0;
  for (auto _ : state) {
    if (!rotate) {
      state.PauseTiming();
      // Begins clean, as the rotating files do: nothing dirty left of the last iteration.
      if (fsync(fd) != 0 || ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return state.SkipWithError("cannot empty the file in the scratch directory");
      }
      state.ResumeTiming();
    }
    for (int period = 0; period < kPeriodsPerIteration; period++) {
      const int64_t t0 = ThreadCpuNs();
      bool ok = WriteAll(fd, data.data(), data.size());
      in_file += data.size();
      if (ok && rotate && in_file >= kFileBytes) {
        ok = fsync(fd) == 0;
        close(fd);
        fd = open_next();
        ok = ok && fd >= 0;
        in_file = 0;
      }
      cpu_ns += ThreadCpuNs() - t0;
      bytes += data.size();
      if (!ok) return state.SkipWithError("writing into the scratch directory failed");
    }
  }
  close(fd);
  SetCpuCounters(state, 0, cpu_ns, bytes);
}
BENCHMARK(BM_StreamDrain_PlainWrite)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_StreamDrain_Memcpy(benchmark::State& state) {
  const std::vector<char> source(kPeriodBytes, 'm');
  std::vector<char> dest(size_t{kPeriodsPerIteration} * kPeriodBytes, 'd');
  int64_t cpu_ns = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    const int64_t t0 = ThreadCpuNs();
    for (int period = 0; period < kPeriodsPerIteration; period++) {
      std::memcpy(dest.data() + period * kPeriodBytes, source.data(), kPeriodBytes);
      benchmark::ClobberMemory();
    }
    cpu_ns += ThreadCpuNs() - t0;
    bytes += dest.size();
  }
  SetCpuCounters(state, 0, cpu_ns, bytes);
}
BENCHMARK(BM_StreamDrain_Memcpy)->Iterations(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// Commits a chunk every kWriterPeriodNs under `mu` until destroyed, and
// while measuring keeps each commit's time from asking for the lock to
// having committed.
class PacedWriter {
 public:
  PacedWriter(absl::Mutex* mu, TraceBuffer* buffer, ChunkSource* chunks)
      : mu_(mu), buffer_(buffer), chunks_(chunks), waits_ns_(kMaxWaits) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PacedWriter() {
    stop_.store(true);
    thread_.join();
  }
  PacedWriter(const PacedWriter&) = delete;
  PacedWriter& operator=(const PacedWriter&) = delete;

  void StartMeasuring() {
    count_.store(0);
    measuring_.store(true);
  }
  // The waits since StartMeasuring(), in ns, sorted.
  std::vector<int64_t> StopMeasuring() {
    measuring_.store(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // A commit under way lands.
    const size_t n = count_.load(std::memory_order_acquire);
    std::vector<int64_t> waits(waits_ns_.begin(), waits_ns_.begin() + static_cast<ptrdiff_t>(n));
    std::sort(waits.begin(), waits.end());
    return waits;
  }

 private:
  void Run() {
    int64_t next = NowNs();
    while (!stop_.load(std::memory_order_relaxed)) {
      while (NowNs() < next) {
      }
      next += kWriterPeriodNs;
      const int64_t t0 = NowNs();
      {
        absl::MutexLock lock(mu_);
        chunks_->CommitNext(buffer_);
      }
      const int64_t wait_ns = NowNs() - t0;
      const size_t n = count_.load(std::memory_order_relaxed);
      if (measuring_.load(std::memory_order_relaxed) && n < waits_ns_.size()) {
        waits_ns_[n] = wait_ns;
        count_.store(n + 1, std::memory_order_release);
      }
      // A writer that fell behind (waiting for the lock) does not burst.
      next = std::max(next, NowNs());
    }
  }

  absl::Mutex* mu_;
  TraceBuffer* buffer_;
  ChunkSource* chunks_;
  std::vector<int64_t> waits_ns_;
  std::atomic<size_t> count_{0};
  std::atomic<bool> measuring_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double PercentileUs(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()));
  return static_cast<double>(sorted[i]) / 1e3;
}

void BM_StreamDrain_WriterPause(benchmark::State& state) {
  const bool drain = state.range(0) == 0;
  ScratchDir dir;
  if (dir.path().empty()) return state.SkipWithError("cannot make a directory under $TMPDIR");
  absl::StatusOr<std::unique_ptr<RotatingTraceFile>> file = OpenStream(dir.path());
  if (!file.ok()) return state.SkipWithError(std::string(file.status().message()).c_str());
  std::unique_ptr<TraceBuffer> buffer = TraceBuffer::Create(kBufferBytes);
  ChunkSource chunks(2);
  chunks.CommitBytes(buffer.get(), kBufferBytes + kPeriodBytes);
  BufferPacketReader reader;
  absl::Mutex mu;
  // The session's drain: what is new read under the lock, written outside.
  int64_t max_hold_ns = 0, max_write_ns = 0;
  uint64_t drained_bytes = 0, drains = 0;
  // In 1 MiB batches, the lock let go between them (ReadSome), as
  // SessionStream::WriteIntoFile reads.
  auto drain_once = [&]() -> absl::Status {
    absl::Status st;
    for (bool all_read = false; !all_read && st.ok();) {
      std::string out;
      {
        absl::MutexLock lock(&mu);
        const int64_t t0 = NowNs();
        all_read = reader.ReadSome({buffer.get()}, &out, kDrainBatchBytes);
        max_hold_ns = std::max(max_hold_ns, NowNs() - t0);
      }
      const int64_t t0 = NowNs();
      st = WriteRotating(file->get(), out);
      max_write_ns = std::max(max_write_ns, NowNs() - t0);
      drained_bytes += out.size();
    }
    drains++;
    return st;
  };
  auto bytes_lost = [&] {
    absl::MutexLock lock(&mu);
    return buffer->stats().bytes_overwritten;
  };
  PacedWriter writer(&mu, buffer.get(), &chunks);
  std::vector<double> max_us, p99_us, p999_us;
  int64_t waited_ns = 0;
  uint64_t commits = 0, lost = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // The writer's steady state.
    if (drain) {
      // Caught up before the window; not counted.
      if (absl::Status st = drain_once(); !st.ok()) {
        return state.SkipWithError(std::string(st.message()).c_str());
      }
      max_hold_ns = max_write_ns = 0;
      drained_bytes = drains = 0;
    }
    const uint64_t lost_before = bytes_lost();
    writer.StartMeasuring();
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; i < kDrainsPerWindow; i++) {
      next += kDrainPeriod;
      std::this_thread::sleep_until(next);
      if (!drain) continue;
      if (absl::Status st = drain_once(); !st.ok()) {
        writer.StopMeasuring();
        return state.SkipWithError(std::string(st.message()).c_str());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // Let a waiting commit land.
    const std::vector<int64_t> waits = writer.StopMeasuring();
    if (drain) lost += bytes_lost() - lost_before;
    commits += waits.size();
    for (int64_t w : waits) waited_ns += w;
    max_us.push_back(waits.empty() ? 0 : static_cast<double>(waits.back()) / 1e3);
    p99_us.push_back(PercentileUs(waits, 0.99));
    p999_us.push_back(PercentileUs(waits, 0.999));
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["pause_max_us"] = *std::max_element(max_us.begin(), max_us.end());
  state.counters["pause_p99_us"] = *std::max_element(p99_us.begin(), p99_us.end());
  state.counters["pause_p999_us"] = *std::max_element(p999_us.begin(), p999_us.end());
  state.counters["commits"] = static_cast<double>(commits) / n;
  state.counters["waited_ms"] = static_cast<double>(waited_ns) / 1e6 / n;
  if (drain) {
    state.counters["hold_max_us"] = static_cast<double>(max_hold_ns) / 1e3;
    state.counters["write_max_ms"] = static_cast<double>(max_write_ns) / 1e6;
    state.counters["drain_MiB"] =
        drains > 0 ? static_cast<double>(drained_bytes) / drains / (1 << 20) : 0;
    state.counters["lost_MiB"] = static_cast<double>(lost) / (1 << 20) / n;
  }
}
BENCHMARK(BM_StreamDrain_WriterPause)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Prints the usual console output, then the drain beside its baselines.
class DrainReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      // With repetitions, the median and the spread; otherwise the one run.
      std::string name = run.run_name.function_name;
      if (!run.run_name.args.empty()) name += "/" + run.run_name.args;
      if (run.run_type == Run::RT_Iteration || run.aggregate_name == "median") {
        median_[name] = run.counters;
      } else if (run.aggregate_name == "stddev") {
        stddev_[name] = run.counters;
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    char line[300];
    const std::string drain = "BM_StreamDrain_Throughput";
    out << "\nStreaming drain, 4 MiB periods into 16 MiB rotating files (medians, +- stddev;\n"
           "  CPU of the draining thread per 10^6 bytes written, ratio to the drain's)\n";
    const std::pair<const char*, std::string> rows[] = {
        {"drain: ReadSome + RotatingTraceFile", drain},
        {"plain write()", "BM_StreamDrain_PlainWrite/0"},
        {"write(), fsync + new file / 16 MiB", "BM_StreamDrain_PlainWrite/1"},
        {"memcpy", "BM_StreamDrain_Memcpy"},
    };
    for (const auto& [label, name] : rows) {
      if (!median_.count(name) || !median_.count(drain)) continue;
      const double mbps = Value(median_, name, "bytes_per_second") / 1e6;
      const double cpu = Value(median_, name, "cpu_ns_per_MB");
      std::snprintf(line, sizeof(line),
                    "  %-36s %7.0f MB/s (+-%.0f)  cpu %8.0f ns/MB (+-%.0f)  drain / this: "
                    "cpu %5.1fx, time %5.1fx\n",
                    label, mbps, Value(stddev_, name, "bytes_per_second") / 1e6, cpu,
                    Value(stddev_, name, "cpu_ns_per_MB"),
                    Value(median_, drain, "cpu_ns_per_MB") / cpu,
                    mbps / (Value(median_, drain, "bytes_per_second") / 1e6));
      out << line;
    }
    if (median_.count(drain)) {
      std::snprintf(line, sizeof(line),
                    "  the drain's cpu: read %.0f ns/MB, write %.0f ns/MB; packets of %.0f "
                    "bytes\n",
                    Value(median_, drain, "read_cpu_ns_per_MB"),
                    Value(median_, drain, "write_cpu_ns_per_MB"),
                    Value(median_, drain, "packet_bytes"));
      out << line;
    }
    const std::string with = "BM_StreamDrain_WriterPause/0";
    const std::string without = "BM_StreamDrain_WriterPause/1";
    if (!median_.count(with) || !median_.count(without)) return;
    out << "\nA writer's wait for the lock + commit, a 4 KiB chunk every 20 us, 2 s windows\n"
           "  (medians of the repetitions, +- stddev)\n";
    for (const auto& [label, name] :
         {std::pair<const char*, std::string>{"drain every 250 ms", with},
          std::pair<const char*, std::string>{"no drain (baseline)", without}}) {
      std::snprintf(line, sizeof(line),
                    "  %-20s max %8.0f us (+-%.0f)  p99.9 %6.1f us (+-%.1f)  p99 %6.1f us "
                    "(+-%.1f)\n",
                    label, Value(median_, name, "pause_max_us"),
                    Value(stddev_, name, "pause_max_us"), Value(median_, name, "pause_p999_us"),
                    Value(stddev_, name, "pause_p999_us"), Value(median_, name, "pause_p99_us"),
                    Value(stddev_, name, "pause_p99_us"));
      out << line;
    }
    const double hold_us = Value(median_, with, "hold_max_us");
    const double drain_mib = Value(median_, with, "drain_MiB");
    std::snprintf(line, sizeof(line),
                  "  added by the drain: max %+.0f us, p99.9 %+.1f us, p99 %+.1f us; waited %.0f "
                  "ms in all (%.0f without), %.0f commits (%.0f)\n"
                  "  the drain held the lock up to %.0f us (+-%.0f) at a time, reading %.1f MiB a "
                  "drain in %.0f batches, wrote a batch in up to %.0f ms outside the lock, lost "
                  "%.1f MiB\n",
                  Value(median_, with, "pause_max_us") - Value(median_, without, "pause_max_us"),
                  Value(median_, with, "pause_p999_us") - Value(median_, without, "pause_p999_us"),
                  Value(median_, with, "pause_p99_us") - Value(median_, without, "pause_p99_us"),
                  Value(median_, with, "waited_ms"), Value(median_, without, "waited_ms"),
                  Value(median_, with, "commits"), Value(median_, without, "commits"), hold_us,
                  Value(stddev_, with, "hold_max_us"), drain_mib,
                  std::ceil(drain_mib * (1 << 20) / kDrainBatchBytes),
                  Value(median_, with, "write_max_ms"), Value(median_, with, "lost_MiB"));
    out << line;
  }

 private:
  using Table = std::map<std::string, benchmark::UserCounters>;
  static double Value(const Table& table, const std::string& name, const char* counter) {
    auto run = table.find(name);
    if (run == table.end()) return 0;
    auto c = run->second.find(counter);
    return c == run->second.end() ? 0 : c->second.value;
  }

  Table median_, stddev_;
};

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  ringside::agent::DrainReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
