// Ftrace page parsing and encoding: raw kernel pages of sched_switch events
// -> PageParser -> FtraceBundleWriter (compact_sched) -> TraceWriter ->
// TraceBuffer, on one core, beside a memcpy of the same pages.

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/sources/ftrace_bundle_writer.h"
#include "agent/writer/producer_buffer.h"
#include "benchmark/benchmark.h"
#include "buffer/trace_buffer.h"
#include "ftrace/event_format.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"

namespace ringside::agent {
namespace {

constexpr char kSchedSwitchFormat[] =
    "name: sched_switch\nID: 372\nformat:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n";

// A full page of sched_switch records (type_len 16: 64-byte records) among
// 8 tasks, as a busy CPU produces.
std::vector<uint8_t> SchedSwitchPage(uint64_t ts, size_t* events) {
  std::vector<uint8_t> page(4096, 0);
  std::memcpy(page.data(), &ts, 8);
  size_t used = 0;
  *events = 0;
  while (used + 68 <= 4080) {
    uint8_t* p = page.data() + 16 + used;
    const uint32_t header = 16 | (1000u << 5);  // type_len 16, delta 1 us.
    std::memcpy(p, &header, 4);
    uint8_t* r = p + 4;
    const uint16_t id = 372;
    std::memcpy(r, &id, 2);
    const int32_t prev = 1000 + static_cast<int32_t>(*events % 8);
    const int32_t next = 1000 + static_cast<int32_t>((*events + 1) % 8);
    std::memcpy(r + 4, &prev, 4);
    const std::string prev_comm = absl::StrCat("worker-", prev % 8);
    const std::string next_comm = absl::StrCat("worker-", next % 8);
    std::memcpy(r + 8, prev_comm.data(), prev_comm.size());
    std::memcpy(r + 24, &prev, 4);
    const int32_t prio = 120;
    std::memcpy(r + 28, &prio, 4);
    const int64_t state = 1;
    std::memcpy(r + 32, &state, 8);
    std::memcpy(r + 40, next_comm.data(), next_comm.size());
    std::memcpy(r + 56, &next, 4);
    std::memcpy(r + 60, &prio, 4);
    used += 68;
    (*events)++;
  }
  const uint64_t commit = used;
  std::memcpy(page.data() + 8, &commit, 8);
  return page;
}

void BM_FtracePageParse(benchmark::State& state) {
  ftrace::EventTable table;
  table.Add(*ftrace::ParseEventFormat("sched", kSchedSwitchFormat));
  ftrace::PageParser parser{ftrace::PageHeaderFormat{}, ftrace::EventHeaderFormat{}};
  FtraceBundleWriter bundles(&table, {});
  auto tb = buffer::TraceBuffer::Create(64 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  auto writer = producer.CreateTraceWriter(1);
  size_t events_per_page = 0;
  const std::vector<uint8_t> page = SchedSwitchPage(1'000'000'000, &events_per_page);
  std::vector<ftrace::RawEvent> events;
  uint64_t pages = 0;
  for (auto _ : state) {
    events.clear();
    parser.Parse(page.data(), page.size(), &events);
    bundles.WriteBundle(writer.get(), 0, events, false);
    if ((++pages & 7) == 0) {
      writer->Flush();
      producer.CommitQueuedInto(tb.get());
    }
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  if (bundles.stats().compact_events != pages * events_per_page) {
    state.SkipWithError("events were lost");
  }
  state.SetItemsProcessed(static_cast<int64_t>(pages * events_per_page));
  state.SetBytesProcessed(static_cast<int64_t>(pages * page.size()));
  state.counters["trace_bytes_per_event"] = static_cast<double>(writer->stats().bytes_written) /
                                            static_cast<double>(pages * events_per_page);
}
BENCHMARK(BM_FtracePageParse);

// Baseline: the same pages memcpy'd into a 64 MiB ring.
void BM_Memcpy_Pages(benchmark::State& state) {
  std::vector<uint8_t> ring(64 << 20);
  std::memset(ring.data(), 0, ring.size());
  size_t events = 0;
  const std::vector<uint8_t> page = SchedSwitchPage(1, &events);
  size_t offset = 0;
  for (auto _ : state) {
    if (offset + page.size() > ring.size()) offset = 0;
    std::memcpy(ring.data() + offset, page.data(), page.size());
    offset += page.size();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * page.size()));
}
BENCHMARK(BM_Memcpy_Pages);

}  // namespace
}  // namespace ringside::agent

BENCHMARK_MAIN();
