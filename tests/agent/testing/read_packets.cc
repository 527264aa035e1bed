#include "tests/agent/testing/read_packets.h"

#include "agent/writer/producer_buffer.h"
#include "buffer/durable_store.h"
#include "gtest/gtest.h"

namespace ringside::agent::testing {

std::vector<ReadPacket> ReadAllPackets(buffer::TraceBuffer* buffer) {
  std::vector<ReadPacket> out;
  buffer->BeginRead();
  buffer::TracePacket packet;
  buffer::PacketSequenceProperties props;
  uint32_t loss = 0;
  while (buffer->ReadNextTracePacket(&packet, &props, &loss)) {
    ReadPacket r;
    EXPECT_TRUE(r.packet.ParseFromString(packet.ToString())) << "packet of " << packet.size();
    r.loss = loss;
    r.writer = props.writer_id;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<trace::TracePacket> CommitAndRead(
    ProducerBuffer* producer, buffer::TraceBuffer* buffer,
    const std::function<bool(const trace::TracePacket&)>& keep) {
  producer->CommitQueuedInto(buffer);
  std::vector<trace::TracePacket> out;
  for (ReadPacket& r : ReadAllPackets(buffer)) {
    if (keep(r.packet)) out.push_back(std::move(r.packet));
  }
  return out;
}

std::vector<trace::TracePacket> WriteAndReadBack(const std::function<void(TraceWriter*)>& write) {
  auto tb = buffer::TraceBuffer::Create(1 << 20);
  ProducerBuffer producer(1, {}, ProducerBuffer::Options{});
  auto writer = producer.CreateTraceWriter(1);
  write(writer.get());
  writer->Flush();
  producer.CommitQueuedInto(tb.get());
  std::vector<trace::TracePacket> out;
  for (ReadPacket& r : ReadAllPackets(tb.get())) out.push_back(std::move(r.packet));
  return out;
}

std::map<int32_t, std::string> ThreadNames(DescriptorTracker* tracker) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  tracker->ApplyTo(&store);
  std::map<int32_t, std::string> threads;
  store.ForEach(
      [&](buffer::DurableStore::Kind, uint64_t, std::string_view bytes) {
        trace::TracePacket p;
        ASSERT_TRUE(p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
        for (const auto& t : p.process_tree().threads()) threads[t.tid()] = t.name();
      },
      /*changed_only=*/false, /*mark_read=*/false);
  return threads;
}

}  // namespace ringside::agent::testing
