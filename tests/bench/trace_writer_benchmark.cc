// TraceWriter throughput: sched_switch-sized packets (64 bytes) written
// through TraceWriter into chunks and committed into a TraceBuffer on the same
// core, beside a memcpy of the same bytes into a ring as large as the buffer.

#include <cstring>
#include <vector>

#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "benchmark/benchmark.h"
#include "buffer/trace_buffer.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::FtraceEvent;
using trace::FtraceEventBundle;
using trace::SchedSwitchFtraceEvent;
using trace::TracePacket;

constexpr size_t kBufferSize = 64 << 20;

// One sched_switch as a packet of 64 bytes on the wire (bytes_per_packet shows it).
void WriteSchedSwitch(TraceWriter* writer, uint64_t i) {
  auto packet = writer->NewTracePacket();
  ProtoMessage* bundle = packet->BeginNested(TracePacket::kFtraceEventsFieldNumber);
  bundle->AppendVarInt(FtraceEventBundle::kCpuFieldNumber, 1);
  ProtoMessage* event = bundle->BeginNested(FtraceEventBundle::kEventFieldNumber);
  event->AppendVarInt(FtraceEvent::kTimestampFieldNumber, 1'000'000'000'000 + i * 1000);
  event->AppendVarInt(FtraceEvent::kPidFieldNumber, 1234);
  ProtoMessage* sw = event->BeginNested(FtraceEvent::kSchedSwitchFieldNumber);
  sw->AppendString(SchedSwitchFtraceEvent::kPrevCommFieldNumber, "kworker/u4:2");
  sw->AppendVarInt(SchedSwitchFtraceEvent::kPrevPidFieldNumber, 123456);
  sw->AppendVarInt(SchedSwitchFtraceEvent::kPrevPrioFieldNumber, 120);
  sw->AppendVarInt(SchedSwitchFtraceEvent::kPrevStateFieldNumber, 1);
  sw->AppendString(SchedSwitchFtraceEvent::kNextCommFieldNumber, "swapper/1");
  sw->AppendVarInt(SchedSwitchFtraceEvent::kNextPidFieldNumber, 0);
  sw->AppendVarInt(SchedSwitchFtraceEvent::kNextPrioFieldNumber, 120);
}

void BM_TraceWriter_SmallPackets(benchmark::State& state) {
  auto tb = buffer::TraceBuffer::Create(kBufferSize);
  ProducerBuffer::Options options;
  options.num_chunks = 64;
  ProducerBuffer producer(1, {}, options);
  auto writer = producer.CreateTraceWriter(1);
  uint64_t i = 0;
  for (auto _ : state) {
    WriteSchedSwitch(writer.get(), i++);
    // The owner's side, on the same core: commit chunks as they fill.
    if ((i & 63) == 0) producer.CommitQueuedInto(tb.get());
  }
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  const uint64_t bytes = writer->stats().bytes_written;
  if (writer->stats().packets_dropped != 0) state.SkipWithError("packets were dropped");
  state.counters["bytes_per_packet"] =
      static_cast<double>(bytes) / static_cast<double>(writer->stats().packets_written);
  state.SetItemsProcessed(static_cast<int64_t>(writer->stats().packets_written));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_TraceWriter_SmallPackets);

// Baseline: the same 64-byte packets memcpy'd into a ring of the same size.
void BM_Memcpy_SmallPackets(benchmark::State& state) {
  std::vector<uint8_t> ring(kBufferSize);
  std::memset(ring.data(), 0, ring.size());
  uint8_t packet[64];
  std::memset(packet, 'p', sizeof(packet));
  size_t offset = 0;
  for (auto _ : state) {
    if (offset + sizeof(packet) > ring.size()) offset = 0;
    std::memcpy(ring.data() + offset, packet, sizeof(packet));
    offset += sizeof(packet);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * sizeof(packet)));
}
BENCHMARK(BM_Memcpy_SmallPackets);

}  // namespace
}  // namespace ringside::agent

BENCHMARK_MAIN();
