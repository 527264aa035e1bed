#include "tests/testing/chunk_builder.h"

#include <algorithm>

#include "buffer/wire_format.h"

namespace ringside::buffer {

ChunkBuilder& ChunkBuilder::AddFragment(std::string_view data) {
  uint8_t header[kFragmentHeaderSize];
  WriteRedundantVarInt(static_cast<uint32_t>(data.size()), header);
  payload_.append(reinterpret_cast<const char*>(header), sizeof(header));
  payload_.append(data);
  fragments_++;
  return *this;
}

ChunkBuilder& ChunkBuilder::AddDropMarker() {
  uint8_t header[kFragmentHeaderSize];
  WriteRedundantVarInt(kPacketSizeDropPacket, header);
  payload_.append(reinterpret_cast<const char*>(header), sizeof(header));
  fragments_++;
  return *this;
}

ChunkBuilder& ChunkBuilder::AddRawBytes(std::string_view bytes) {
  payload_.append(bytes);
  return *this;
}

ChunkBuilder& ChunkBuilder::PadTo(size_t payload_size) {
  if (payload_.size() < payload_size) payload_.resize(payload_size, '\0');
  return *this;
}

uint16_t ChunkBuilder::num_fragments() const {
  return num_fragments_override_ >= 0 ? static_cast<uint16_t>(num_fragments_override_) : fragments_;
}

std::vector<uint8_t> ChunkBuilder::Build() const {
  std::vector<uint8_t> chunk(kChunkHeaderSize + payload_.size());
  WriteChunkHeader(ChunkHeader{chunk_id_, writer_id_, num_fragments(), flags_}, chunk.data());
  std::copy(payload_.begin(), payload_.end(), chunk.begin() + kChunkHeaderSize);
  return chunk;
}

}  // namespace ringside::buffer
