// TraceBuffer benchmarks, in the shapes of the TraceBufferV2 design doc's
// table, each next to a memcpy baseline measured in the same run:
//
//   BM_TraceBuffer_WR_SingleWriter     bytes committed per second, one sequence
//   BM_TraceBuffer_WR_MultipleWriters  the same with 64 interleaved sequences
//   BM_TraceBuffer_WR_FirstPass/0,/1   64 writers' first pass over a fresh buffer,
//                                      as created (/0) and populated first (/1,
//                                      what a session does: SessionBuffers)
//   BM_TraceBuffer_RD_MixedPackets     packet bytes read (and copied out) per second
//   BM_TraceBuffer_Patch/0,/10,/-1     ns per patch: newest chunk, 10 back, gone
//   BM_TraceBuffer_CloneReadOnly       bytes cloned per second, as a session clones
//                                      (the clone's memory prefaulted, then copied)
//   BM_Memcpy_Ring                     memcpy of the same chunks into a ring as big
//                                      as the buffer (baseline of WR and RD)
//   BM_Memcpy_Whole                    memcpy of a whole buffer into new memory
//                                      (baseline of the clone, which must do that)
//   BM_DurableStore_Drained/N          ns per drain of a durable store describing N
//                                      live tasks, with a task described and ended
//                                      before each
//   BM_DurableStore_PutFull/N          ns per new task's descriptor in a store full
//                                      of some N live ones (each put evicts one)
//   BM_DurableStore_ChangedPass/N      ns per read pass of a store of N tasks that
//                                      takes the 10 descriptors written since the last
//   BM_DurableStore_Clone/N            us per copy of a store of N tasks (a snapshot's)
//
// After the usual output, a table gives each figure as a ratio to its baseline.

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "buffer/chunk_abi.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "tests/bench/bench_main.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::buffer {
namespace {

constexpr size_t kBufferSize = 64 << 20;  // Wraps every ~16K chunks.
constexpr size_t kChunkSize = 4096;
constexpr size_t kPayloadSize = kChunkSize - kChunkHeaderSize;

// Memory for the memcpy baselines as TraceBuffer maps its own: fresh, on a
// 2 MiB boundary, asking for transparent huge pages. A baseline of 4 KiB
// pages would count against the buffer what only the pages' size gives.
class Memory {
 public:
  explicit Memory(size_t size) : size_(size), reserved_(size + kAlign) {
    base_ = mmap(nullptr, reserved_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) std::abort();
    const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
    data_ = reinterpret_cast<uint8_t*>((b + kAlign - 1) / kAlign * kAlign);
    madvise(data_, size_, MADV_HUGEPAGE);
  }
  ~Memory() { munmap(base_, reserved_); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kAlign = 2 << 20;
  size_t size_, reserved_;
  void* base_;
  uint8_t* data_;
};

// A 4 KiB chunk full of packets of 60..400 bytes, like a busy ftrace writer's.
ChunkBuilder MakeChunk(ChunkID id, WriterID writer, uint32_t seed) {
  std::mt19937 rng(seed);
  ChunkBuilder b(id, writer);
  for (;;) {
    const size_t left = kPayloadSize - b.payload().size();
    if (left < kFragmentHeaderSize + 60) break;
    const size_t size = std::min<size_t>(60 + rng() % 340, left - kFragmentHeaderSize);
    b.AddFragment(std::string(size, static_cast<char>('a' + rng() % 26)));
  }
  return b;
}

void Commit(TraceBuffer* buffer, ProducerID producer, const ChunkBuilder& b, ChunkID id) {
  buffer->CopyChunkUntrusted(producer, ClientIdentity{0, 0}, b.writer_id(), id, b.num_fragments(),
                             b.flags(), true, b.payload_data(), b.payload().size());
}

// The WR benchmarks populate their buffer first, as a session does
// (SessionBuffers::Create()); BM_TraceBuffer_WR_FirstPass shows the difference.
void BM_TraceBuffer_WR_SingleWriter(benchmark::State& state) {
  auto buffer = TraceBuffer::Create(kBufferSize);
  buffer->Populate();
  const ChunkBuilder chunk = MakeChunk(0, 1, 1);
  ChunkID id = 0;
  for (auto _ : state) Commit(buffer.get(), 1, chunk, id++);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk.payload().size()));
  state.counters["wraps"] = static_cast<double>(buffer->stats().write_wrap_count);
}
BENCHMARK(BM_TraceBuffer_WR_SingleWriter);

void BM_TraceBuffer_WR_MultipleWriters(benchmark::State& state) {
  constexpr int kWriters = 64;
  auto buffer = TraceBuffer::Create(kBufferSize);
  buffer->Populate();
  std::vector<ChunkBuilder> chunks;
  for (int w = 0; w < kWriters; w++) chunks.push_back(MakeChunk(0, static_cast<WriterID>(w), w));
  std::vector<ChunkID> ids(kWriters, 0);
  size_t bytes = 0;
  uint32_t next = 0;
  for (auto _ : state) {
    const int w = static_cast<int>((next++ * 7) % kWriters);  // Interleaved, not round-robin.
    Commit(buffer.get(), static_cast<ProducerID>(1 + w % 4), chunks[w], ids[w]++);
    bytes += chunks[w].payload().size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_TraceBuffer_WR_MultipleWriters);

// One pass of 64 interleaved writers over a fresh buffer, each pass in a
// new one: the page faults of its first fill are on the writers' path unless
// it was populated first (arg 1). The buffer is created (and populated)
// outside the timing.
void BM_TraceBuffer_WR_FirstPass(benchmark::State& state) {
  constexpr int kWriters = 64;
  constexpr size_t kPassSize = 16 << 20;
  std::vector<ChunkBuilder> chunks;
  for (int w = 0; w < kWriters; w++) chunks.push_back(MakeChunk(0, static_cast<WriterID>(w), w));
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto buffer = TraceBuffer::Create(kPassSize);
    if (state.range(0) != 0) buffer->Populate();
    std::vector<ChunkID> ids(kWriters, 0);
    state.ResumeTiming();
    for (size_t pass = 0, next = 0; pass + kChunkSize <= kPassSize; pass += kChunkSize) {
      const int w = static_cast<int>((next++ * 7) % kWriters);
      Commit(buffer.get(), static_cast<ProducerID>(1 + w % 4), chunks[w], ids[w]++);
      bytes += chunks[w].payload().size();
    }
    state.PauseTiming();
    buffer.reset();  // Its munmap outside the timing too.
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_TraceBuffer_WR_FirstPass)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Fills the buffer with 8 sequences of mixed packets; every fourth chunk ends
// in a packet fragmented into the next chunk. Returns the packet bytes held.
size_t FillMixed(TraceBuffer* buffer, std::vector<ChunkID>* ids, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t written = 0;
  for (size_t i = 0; written + kChunkSize * 2 < buffer->size(); i++) {
    const WriterID w = static_cast<WriterID>(rng() % ids->size());
    ChunkID& id = (*ids)[w];
    ChunkBuilder b(id, w);
    size_t packets = 0;
    for (;;) {
      const size_t left = kPayloadSize - b.payload().size();
      const size_t size = rng() % 8 == 0 ? 1500 + rng() % 1000 : 20 + rng() % 300;
      if (left < kFragmentHeaderSize + size) break;
      b.AddFragment(std::string(size, 'p'));
      packets += size;
    }
    const bool split = i % 4 == 0;
    if (split) b.AddFragment(std::string(200, 's')).set_flags(kLastPacketContinuesOnNextChunk);
    Commit(buffer, 1, b, id++);
    ChunkBuilder tail(id, w);
    if (split) {
      tail.AddFragment(std::string(300, 't')).set_flags(kFirstPacketContinuesFromPrevChunk);
      tail.AddFragment(std::string(100, 'u'));
      Commit(buffer, 1, tail, id++);
      packets += 600;
    }
    written += b.payload().size() + tail.payload().size() + 40;
  }
  return written;
}

void BM_TraceBuffer_RD_MixedPackets(benchmark::State& state) {
  auto buffer = TraceBuffer::Create(kBufferSize);
  std::vector<ChunkID> ids(8, 0);
  std::string out;
  out.reserve(1 << 20);
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    FillMixed(buffer.get(), &ids, static_cast<uint32_t>(bytes));
    state.ResumeTiming();
    buffer->BeginRead();
    while (buffer->ReadNextTracePacket(&packet, &props, &loss)) {
      // Copy each packet out, as the file writer does.
      if (out.size() + packet.size() > out.capacity()) out.clear();
      packet.AppendTo(&out);
      bytes += packet.size();
    }
  }
  benchmark::DoNotOptimize(out.data());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_TraceBuffer_RD_MixedPackets)->Unit(benchmark::kMillisecond);

// Baseline of WR and RD: the same chunks memcpy'd one after the other, in the
// same order, into a destination as large as the buffer (of huge pages, as
// the buffer's), wrapping at its end.
// /1: the single writer's chunk; /64: the 64 writers' chunks, interleaved.
void BM_Memcpy_Ring(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  Memory ring(kBufferSize);
  std::memset(ring.data(), 0, ring.size());  // Fault the pages in, as the buffer's are.
  std::vector<ChunkBuilder> chunks;
  for (int w = 0; w < writers; w++) {
    chunks.push_back(writers == 1 ? MakeChunk(0, 1, 1) : MakeChunk(0, static_cast<WriterID>(w), w));
  }
  size_t offset = 0, bytes = 0;
  uint32_t next = 0;
  for (auto _ : state) {
    const ChunkBuilder& chunk = chunks[(next++ * 7) % writers];
    const size_t n = chunk.payload().size();
    if (offset + n > ring.size()) offset = 0;
    std::memcpy(ring.data() + offset, chunk.payload_data(), n);
    offset += (n + 20 + 3) & ~size_t{3};  // The same stride as the buffer's.
    bytes += n;
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy_Ring)->Arg(1)->Arg(64);

// /0: the newest chunk; /10: ten chunks back in its sequence; /-1: a chunk
// that is no longer in the buffer.
void BM_TraceBuffer_Patch(benchmark::State& state) {
  auto buffer = TraceBuffer::Create(kBufferSize);
  const int back = static_cast<int>(state.range(0));
  ChunkID last = 0;
  // 10,000 chunks of 8 sequences, all waiting for patches.
  for (ChunkID id = 0; id < 1250; id++) {
    for (WriterID w = 0; w < 8; w++) {
      ChunkBuilder b(id, w);
      b.AddFragment(std::string(300, 'x')).set_flags(kChunkNeedsPatching);
      Commit(buffer.get(), 1, b, id);
    }
    last = id;
  }
  const ChunkID target = back < 0 ? last + 1000 : last - static_cast<ChunkID>(back);
  TraceBuffer::Patch patch{100, {1, 2, 3, 4}};
  bool ok = true;
  for (auto _ : state) {
    ok = buffer->TryPatchChunkContents(1, 3, target, &patch, 1, /*other_patches_pending=*/true);
    benchmark::DoNotOptimize(ok);
  }
  if (ok != (back >= 0)) state.SkipWithError("patch result not as expected");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TraceBuffer_Patch)->Arg(0)->Arg(10)->Arg(-1);

void BM_TraceBuffer_CloneReadOnly(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0)) << 20;
  auto buffer = TraceBuffer::Create(size);
  std::vector<ChunkID> ids(8, 0);
  FillMixed(buffer.get(), &ids, 7);
  for (auto _ : state) {
    // As SessionBuffers clones: the clone's memory faulted in (in huge
    // pages where the kernel gives them), then the copy.
    std::unique_ptr<TraceBuffer> clone = buffer->BeginClone();
    clone->PrefaultCloneMemory();
    while (!buffer->ContinueClone(buffer->size())) {
    }
    benchmark::DoNotOptimize(clone.get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buffer->used_size()));
}
BENCHMARK(BM_TraceBuffer_CloneReadOnly)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

// Baseline of the clone: a whole buffer memcpy'd into freshly mapped memory
// (a clone cannot reuse memory, so the page faults are part of the job), of
// huge pages as the clone's.
void BM_Memcpy_Whole(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0)) << 20;
  std::vector<uint8_t> source(size, 's');
  for (auto _ : state) {
    Memory dst(size);
    std::memcpy(dst.data(), source.data(), size);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_Memcpy_Whole)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

// What the buffer owner pays at each flush (the default, every second) for
// the durable store, on a machine of N threads whose tasks come and go: a
// task described and ended, then the drain.
void BM_DurableStore_Drained(benchmark::State& state) {
  const uint64_t live = static_cast<uint64_t>(state.range(0));
  DurableStore store(256 << 20, kBufferSize);
  const std::string packet(120, 'd');
  for (uint64_t id = 1; id <= live; id++) store.Put(DurableStore::Kind::kThread, id, packet);
  uint64_t next = live + 1, written = 0;
  for (auto _ : state) {
    store.Put(DurableStore::Kind::kThread, next, packet);
    store.MarkEnded(DurableStore::Kind::kThread, next++);
    written += kBufferSize / 16;  // An end is compacted some 20 drains on.
    store.Drained(written);
  }
  state.counters["entries"] = static_cast<double>(store.stats().entries);
}
BENCHMARK(BM_DurableStore_Drained)->Arg(1000)->Arg(10000);

// What the buffer owner pays for a new task's descriptor on a machine of
// more live threads than the store holds (N of them fill it): each put
// evicts the live entry written least recently, counted as a loss.
void BM_DurableStore_PutFull(benchmark::State& state) {
  const size_t live = static_cast<size_t>(state.range(0));
  const std::string packet(120, 'd');
  DurableStore store(live * DurableStore::EntryCost(packet.size()) * 5 / 4, kBufferSize);
  uint64_t next = 1;
  while (store.stats().evicted_live == 0) store.Put(DurableStore::Kind::kThread, next++, packet);
  for (auto _ : state) store.Put(DurableStore::Kind::kThread, next++, packet);
  state.counters["entries"] = static_cast<double>(store.stats().entries);
}
BENCHMARK(BM_DurableStore_PutFull)->Arg(1000)->Arg(10000)->Arg(50000);

// What a streamed file's write (every file_write_period_ms) pays for the
// durable store of a machine of N tasks: the read pass that takes the
// descriptors written since the last one, here 10 of them.
void BM_DurableStore_ChangedPass(benchmark::State& state) {
  const uint64_t live = static_cast<uint64_t>(state.range(0));
  DurableStore store(256 << 20, kBufferSize);
  const std::string packet(120, 'd');
  for (uint64_t id = 1; id <= live; id++) store.Put(DurableStore::Kind::kThread, id, packet);
  DurableReadPass pass;
  pass.Begin(&store);
  uint64_t next = 1;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < 10; i++) store.Put(DurableStore::Kind::kThread, next++ % live + 1, packet);
    state.ResumeTiming();
    pass.Begin(&store);
  }
}
BENCHMARK(BM_DurableStore_ChangedPass)->Arg(1000)->Arg(16000)->Arg(50000);

// What a snapshot pays for the durable store of a machine of N tasks, a
// tenth of them ended: its copy (DurableStore::Clone).
void BM_DurableStore_Clone(benchmark::State& state) {
  const uint64_t tasks = static_cast<uint64_t>(state.range(0));
  DurableStore store(256 << 20, kBufferSize);
  const std::string packet(120, 'd');
  for (uint64_t id = 1; id <= tasks; id++) {
    store.Put(DurableStore::Kind::kThread, id, packet);
    if (id % 10 == 0) store.MarkEnded(DurableStore::Kind::kThread, id);
  }
  for (uint64_t id = 1; id <= tasks; id += 3) store.Put(DurableStore::Kind::kThread, id, packet);
  for (auto _ : state) benchmark::DoNotOptimize(store.Clone());
}
BENCHMARK(BM_DurableStore_Clone)->Arg(1000)->Arg(16000)->Arg(50000)->Unit(benchmark::kMicrosecond);

// Prints the usual console output, then each figure against its baseline.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      // With repetitions, compare medians; otherwise the single run.
      if (run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      const std::string name = run.run_name.str();
      auto bps = run.counters.find("bytes_per_second");
      if (bps != run.counters.end()) bytes_per_second_[name] = bps->second.value;
      ns_per_op_[name] =
          run.GetAdjustedRealTime() * (run.time_unit == benchmark::kMillisecond ? 1e6 : 1.0);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    out << "\nTraceBuffer vs memcpy baselines (same run)\n";
    const std::pair<const char*, const char*> ratios[] = {
        {"BM_TraceBuffer_WR_SingleWriter", "BM_Memcpy_Ring/1"},
        {"BM_TraceBuffer_WR_MultipleWriters", "BM_Memcpy_Ring/64"},
        {"BM_TraceBuffer_WR_FirstPass/0", "BM_Memcpy_Ring/64"},
        {"BM_TraceBuffer_WR_FirstPass/1", "BM_Memcpy_Ring/64"},
        {"BM_TraceBuffer_RD_MixedPackets", "BM_Memcpy_Ring/1"},
        {"BM_TraceBuffer_CloneReadOnly/64", "BM_Memcpy_Whole/64"},
        {"BM_TraceBuffer_CloneReadOnly/256", "BM_Memcpy_Whole/256"},
    };
    char line[200];
    for (const auto& [name, base] : ratios) {
      if (!bytes_per_second_.count(name) || !bytes_per_second_.count(base)) continue;
      const double a = bytes_per_second_[name], b = bytes_per_second_[base];
      std::snprintf(line, sizeof(line), "  %-36s %8.2f GiB/s  %5.2fx %s (%.2f GiB/s)\n", name,
                    a / (1 << 30), a / b, base, b / (1 << 30));
      out << line;
    }
    for (const char* name :
         {"BM_TraceBuffer_Patch/0", "BM_TraceBuffer_Patch/10", "BM_TraceBuffer_Patch/-1"}) {
      if (!ns_per_op_.count(name)) continue;
      std::snprintf(line, sizeof(line), "  %-36s %8.1f ns per patch\n", name, ns_per_op_[name]);
      out << line;
    }
  }

 private:
  std::map<std::string, double> bytes_per_second_;
  std::map<std::string, double> ns_per_op_;
};

}  // namespace
}  // namespace ringside::buffer

int main(int argc, char** argv) {
  ringside::buffer::RatioReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
