// What compressing a trace costs, and what it saves: each codec and level
// Perfetto's config can ask for (deflate at zlib's levels 1 and 6 for
// reference, zstd at 1, 3 and 9) on a real recording, beside a plain
// memcpy of the same bytes as the baseline of the same run. Reports the
// CPU per MB of packets and the ratio (compressed / plain bytes).
// BM_CompressBatches gives both against the batch size: the bytes each
// Compress() call takes (ringside writes 1 MiB batches, each cut into
// compressed packets of at most kMaxCompressedInputBytes, 480 KiB), from
// 16 KiB up to that cap, for zstd 3 and deflate 6.
//
// The recording: RINGSIDE_BENCH_TRACE, or else `ringside record` with its
// default config while a hackbench run lasts (a few seconds; needs root;
// the file, in TMPDIR, is removed afterwards).

#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/tracefile/packet_compression.h"
#include "agent/tracefile/trace_file_reader.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"
#include "tests/bench/bench_main.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

// The recording's framed packets, inflated if the file is compressed.
const std::string& Trace() {
  static const std::string* trace = [] {
    auto* out = new std::string();
    std::string path;
    if (const char* given = getenv("RINGSIDE_BENCH_TRACE"); given != nullptr && *given != '\0') {
      path = given;
    } else if (geteuid() == 0) {
      const char* tmp = getenv("TMPDIR");
      path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
             "/ringside_bench_compression_" + std::to_string(getpid()) + ".pftrace";
      const std::string cmd = ringside::testing::RingsideBinary() + " record -o " + path +
                              " -- hackbench -p -g 2 -f 4 -l 3000 >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) return out;
    } else {
      return out;
    }
    absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
    if (reader.ok()) {
      std::string packet;
      uint64_t offset = 0;
      while ((*reader)->ReadNextPacket(&packet, &offset) == TraceFileReader::Result::kPacket) {
        buffer::AppendLengthDelimitedField(buffer::kTracePacketFieldNumber, packet, out);
      }
    }
    if (getenv("RINGSIDE_BENCH_TRACE") == nullptr) std::remove(path.c_str());
    return out;
  }();
  return *trace;
}

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// `cpu_ns`: this thread's CPU over all iterations.
void SetCounters(benchmark::State& state, double cpu_ns, double ratio) {
  const double mb = static_cast<double>(Trace().size()) / (1 << 20);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Trace().size()));
  state.counters["cpu_ms_per_MB"] = cpu_ns / 1e6 / (static_cast<double>(state.iterations()) * mb);
  if (ratio > 0) state.counters["ratio"] = ratio;
  state.counters["MB"] = mb;
}

void BM_Memcpy(benchmark::State& state) {
  if (Trace().empty()) return state.SkipWithError("no recording (root, or RINGSIDE_BENCH_TRACE)");
  std::string dst(Trace().size(), '\0');
  const double start = ThreadCpuNs();
  for (auto _ : state) {
    std::memcpy(dst.data(), Trace().data(), Trace().size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, ThreadCpuNs() - start, 0);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

// Compresses `runs` (whole framed packets each) one Compress() call a run,
// as many times as the state asks, with the codec and level of the
// benchmark's first two arguments; `label` follows them in the label.
void CompressRuns(benchmark::State& state, const std::vector<std::string_view>& runs,
                  const std::string& label) {
  const PacketCompression c{static_cast<PacketCodec>(state.range(0)),
                            static_cast<int>(state.range(1))};
  state.SetLabel(absl::StrCat(PacketCodecName(c.codec), " ", c.level, label));
  absl::StatusOr<std::unique_ptr<PacketCompressor>> compressor = PacketCompressor::Create(c);
  if (!compressor.ok()) return state.SkipWithError(compressor.status().ToString().c_str());
  std::string out;
  const double start = ThreadCpuNs();
  for (auto _ : state) {
    out.clear();
    for (std::string_view run : runs) {
      if (!(*compressor)->Compress(run, &out).ok()) return state.SkipWithError("compress");
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, ThreadCpuNs() - start,
              static_cast<double>(out.size()) / static_cast<double>(Trace().size()));
}

void BM_Compress(benchmark::State& state) {
  if (Trace().empty()) return state.SkipWithError("no recording (root, or RINGSIDE_BENCH_TRACE)");
  CompressRuns(state, {Trace()}, "");
}
BENCHMARK(BM_Compress)
    ->Args({static_cast<int>(PacketCodec::kDeflate), 1})
    ->Args({static_cast<int>(PacketCodec::kDeflate), 6})
    ->Args({static_cast<int>(PacketCodec::kZstd), 1})
    ->Args({static_cast<int>(PacketCodec::kZstd), 3})
    ->Args({static_cast<int>(PacketCodec::kZstd), 9})
    ->Unit(benchmark::kMillisecond);

// The trace cut into runs of whole framed packets of about `batch` bytes
// each (a packet larger than a batch is a run of its own).
std::vector<std::string_view> Batches(size_t batch) {
  std::vector<std::string_view> runs;
  const std::string& t = Trace();
  const auto* begin = reinterpret_cast<const uint8_t*>(t.data());
  const uint8_t* p = begin;
  const uint8_t* end = begin + t.size();
  const uint8_t* run = p;
  while (p < end) {
    const uint8_t* packet = p;
    uint64_t tag = 0, size = 0;
    if (!buffer::ReadVarInt(&p, end, &tag) || !buffer::ReadVarInt(&p, end, &size) ||
        size > static_cast<uint64_t>(end - p)) {
      return {};
    }
    p += size;
    if (packet > run && static_cast<size_t>(p - run) > batch) {
      runs.emplace_back(reinterpret_cast<const char*>(run), static_cast<size_t>(packet - run));
      run = packet;
    }
  }
  if (p > run) runs.emplace_back(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
  return runs;
}

void BM_CompressBatches(benchmark::State& state) {
  if (Trace().empty()) return state.SkipWithError("no recording (root, or RINGSIDE_BENCH_TRACE)");
  const size_t batch = static_cast<size_t>(state.range(2)) << 10;
  const std::vector<std::string_view> runs = Batches(batch);
  if (runs.empty()) return state.SkipWithError("the recording's packets do not parse");
  CompressRuns(state, runs, absl::StrCat(", ", batch >> 10, " KiB batches"));
  state.counters["batches"] = static_cast<double>(runs.size());
}
void BatchSizes(benchmark::internal::Benchmark* b) {
  for (int codec :
       {static_cast<int>(PacketCodec::kZstd), static_cast<int>(PacketCodec::kDeflate)}) {
    const int level = codec == static_cast<int>(PacketCodec::kZstd) ? 3 : 6;
    for (int kib : {16, 64, 256, 480}) b->Args({codec, level, kib});
  }
}
BENCHMARK(BM_CompressBatches)->Apply(BatchSizes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ringside::agent

int main(int argc, char** argv) {
  benchmark::ConsoleReporter reporter;
  return ringside::bench::RunWithMedians(argc, argv, &reporter);
}
