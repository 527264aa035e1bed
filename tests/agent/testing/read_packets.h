#ifndef RINGSIDE_TESTS_AGENT_TESTING_READ_PACKETS_H_
#define RINGSIDE_TESTS_AGENT_TESTING_READ_PACKETS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/descriptors/descriptor_tracker.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "buffer/trace_buffer.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent::testing {

// A packet read back from a TraceBuffer, decoded with libprotobuf.
struct ReadPacket {
  trace::TracePacket packet;
  uint32_t loss = 0;  // previous_packet_on_sequence_dropped.
  buffer::WriterID writer = 0;
};

// Reads every packet of one pass over `buffer`; a packet libprotobuf cannot
// decode fails the current test.
std::vector<ReadPacket> ReadAllPackets(buffer::TraceBuffer* buffer);

// Commits what `producer` queued into `buffer` and returns the packets of
// one pass over `buffer` that `keep` keeps.
std::vector<trace::TracePacket> CommitAndRead(
    ProducerBuffer* producer, buffer::TraceBuffer* buffer,
    const std::function<bool(const trace::TracePacket&)>& keep);

// Runs `write` with a TraceWriter of a fresh producer, flushes it into a
// 1 MiB TraceBuffer and returns the packets read back from it.
std::vector<trace::TracePacket> WriteAndReadBack(const std::function<void(TraceWriter*)>& write);

// The threads `tracker` has described so far, by tid: their names (its
// updates applied to a store of their own).
std::map<int32_t, std::string> ThreadNames(DescriptorTracker* tracker);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_READ_PACKETS_H_
