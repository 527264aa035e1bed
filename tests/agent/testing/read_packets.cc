#include "tests/agent/testing/read_packets.h"

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

}  // namespace ringside::agent::testing
