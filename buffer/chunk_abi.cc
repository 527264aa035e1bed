#include "buffer/chunk_abi.h"

#include <algorithm>

namespace ringside::buffer {

void WriteChunkHeader(const ChunkHeader& header, uint8_t* dst) {
  const uint16_t packets = static_cast<uint16_t>((header.num_fragments & kMaxFragmentsPerChunk) |
                                                 ((header.flags & 0x3f) << 10));
  for (int i = 0; i < 4; i++) dst[i] = static_cast<uint8_t>(header.chunk_id >> (8 * i));
  dst[4] = static_cast<uint8_t>(header.writer_id);
  dst[5] = static_cast<uint8_t>(header.writer_id >> 8);
  dst[6] = static_cast<uint8_t>(packets);
  dst[7] = static_cast<uint8_t>(packets >> 8);
}

bool ReadChunkHeader(const uint8_t* chunk, size_t size, ChunkHeader* header) {
  if (size < kChunkHeaderSize) return false;
  header->chunk_id = static_cast<ChunkID>(chunk[0]) | static_cast<ChunkID>(chunk[1]) << 8 |
                     static_cast<ChunkID>(chunk[2]) << 16 | static_cast<ChunkID>(chunk[3]) << 24;
  header->writer_id = static_cast<WriterID>(chunk[4] | chunk[5] << 8);
  const uint16_t packets = static_cast<uint16_t>(chunk[6] | chunk[7] << 8);
  header->num_fragments = packets & kMaxFragmentsPerChunk;
  header->flags = static_cast<uint8_t>(packets >> 10);
  return true;
}

}  // namespace ringside::buffer
