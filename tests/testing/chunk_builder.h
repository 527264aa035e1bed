#ifndef RINGSIDE_TESTS_TESTING_CHUNK_BUILDER_H_
#define RINGSIDE_TESTS_TESTING_CHUNK_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "buffer/chunk_abi.h"

namespace ringside::buffer {

// Builds chunks fragment by fragment, for the tests and benchmarks (the
// agent's writer fills its chunks in place: agent/writer/).
//
//   ChunkBuilder b(/*chunk_id=*/7, /*writer_id=*/1);
//   b.AddFragment(packet_bytes).set_flags(kLastPacketContinuesOnNextChunk);
//   std::vector<uint8_t> chunk = b.Build();          // header + payload
//   std::string_view payload = b.payload();          // what CopyChunkUntrusted takes
class ChunkBuilder {
 public:
  ChunkBuilder(ChunkID chunk_id, WriterID writer_id) : chunk_id_(chunk_id), writer_id_(writer_id) {}

  ChunkBuilder& set_flags(uint8_t flags) {
    flags_ = flags;
    return *this;
  }
  // Overrides the fragment count written in the header (for hostile chunks).
  ChunkBuilder& set_num_fragments(uint16_t n) {
    num_fragments_override_ = n;
    return *this;
  }
  // Appends a fragment with a 4-byte redundant size header.
  ChunkBuilder& AddFragment(std::string_view data);
  // Appends a fragment whose size header says kPacketSizeDropPacket.
  ChunkBuilder& AddDropMarker();
  // Appends raw bytes to the payload without counting a fragment (hostile or
  // hand-encoded content).
  ChunkBuilder& AddRawBytes(std::string_view bytes);
  // Pads the payload with zeros up to `payload_size` bytes (as a real chunk,
  // whose unused tail is left as it was).
  ChunkBuilder& PadTo(size_t payload_size);

  uint16_t num_fragments() const;
  uint8_t flags() const { return flags_; }
  ChunkID chunk_id() const { return chunk_id_; }
  WriterID writer_id() const { return writer_id_; }
  // The payload: what follows the 8-byte header.
  const std::string& payload() const { return payload_; }
  const uint8_t* payload_data() const { return reinterpret_cast<const uint8_t*>(payload_.data()); }
  // The whole chunk, header included.
  std::vector<uint8_t> Build() const;

 private:
  ChunkID chunk_id_;
  WriterID writer_id_;
  uint8_t flags_ = 0;
  uint16_t fragments_ = 0;
  int num_fragments_override_ = -1;
  std::string payload_;
};

}  // namespace ringside::buffer

#endif  // RINGSIDE_TESTS_TESTING_CHUNK_BUILDER_H_
