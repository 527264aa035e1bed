#ifndef RINGSIDE_AGENT_SESSION_SEQUENCE_IDS_H_
#define RINGSIDE_AGENT_SESSION_SEQUENCE_IDS_H_

#include <cstdint>

namespace ringside::agent {

// The trusted_packet_sequence_id of each kind of packet in a session's
// files: the packets the session writes itself (service_packets.h) go on
// sequence 1, the durable descriptors on 2, and the data sources' writers
// get 3, 4, ... in order of first appearance (BufferPacketReader).
inline constexpr uint32_t kServiceSequenceId = 1;
inline constexpr uint32_t kDescriptorSequenceId = 2;
inline constexpr uint32_t kFirstDataSequenceId = 3;

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_SEQUENCE_IDS_H_
