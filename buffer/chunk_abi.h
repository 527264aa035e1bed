#ifndef RINGSIDE_BUFFER_CHUNK_ABI_H_
#define RINGSIDE_BUFFER_CHUNK_ABI_H_

// The producer chunk ABI: the byte layout in which producers hand trace packets
// to the buffer. Identical, byte for byte, to the chunks of Perfetto's
// shared-memory buffer, so a chunk written by any Perfetto-style producer can be
// committed into a ringside TraceBuffer.
//
//   0        4        6        8
//   +--------+--------+--------+------------------------------------------+
//   |chunk_id|writer_ |packets |  fragment 0  |  fragment 1  | ...        |
//   | u32 LE |id u16  | u16    | size | data  | size | data  |            |
//   +--------+--------+--------+------------------------------------------+
//            packets: bits 0..9 = number of fragments, bits 10..15 = flags
//
// Each fragment is prefixed by its size as a base-128 varint of at most 4 bytes
// ("redundant": padded with continuation bits to exactly 4 bytes, so a writer
// can reserve the size before it knows it). Usually one fragment is one
// TracePacket; the first fragment may continue a packet begun in the previous
// chunk of the same writer and the last may continue in the next one. A
// fragment whose size is kPacketSizeDropPacket carries no data: it tells the
// reader that the writer dropped data here.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "buffer/wire_format.h"

namespace ringside::buffer {

using ProducerID = uint16_t;
using WriterID = uint16_t;
using ChunkID = uint32_t;

// Chunk header flags (the 6-bit `flags` of the packets word).
inline constexpr uint8_t kFirstPacketContinuesFromPrevChunk = 1 << 0;
inline constexpr uint8_t kLastPacketContinuesOnNextChunk = 1 << 1;
inline constexpr uint8_t kChunkNeedsPatching = 1 << 2;
inline constexpr uint8_t kAllChunkFlags =
    kFirstPacketContinuesFromPrevChunk | kLastPacketContinuesOnNextChunk | kChunkNeedsPatching;

inline constexpr size_t kChunkHeaderSize = 8;
inline constexpr size_t kMinChunkSize = 4 * 1024;
inline constexpr size_t kMaxChunkSize = 64 * 1024;
// The largest payload (chunk minus header) a chunk can carry.
inline constexpr size_t kMaxChunkPayloadSize = kMaxChunkSize - kChunkHeaderSize;
// The fragment count has 10 bits.
inline constexpr uint16_t kMaxFragmentsPerChunk = (1 << 10) - 1;

// A fragment size header is a varint of at most this many bytes; writers
// reserve it as a redundant varint (WriteRedundantVarInt in wire_format.h).
inline constexpr size_t kFragmentHeaderSize = kRedundantVarIntSize;
// The largest value a 4-byte varint holds; as a fragment size it means "the
// writer dropped data here" and the fragment has no data.
inline constexpr uint32_t kPacketSizeDropPacket = kMaxRedundantVarIntValue;
// Fragments can never be larger than this.
inline constexpr uint32_t kMaxFragmentSize = kPacketSizeDropPacket - 1;

struct ChunkHeader {
  ChunkID chunk_id = 0;
  WriterID writer_id = 0;
  uint16_t num_fragments = 0;  // 10 bits are kept.
  uint8_t flags = 0;           // 6 bits are kept.
};

// Writes the 8-byte header at `dst`.
void WriteChunkHeader(const ChunkHeader& header, uint8_t* dst);
// Reads the header of a chunk of `size` bytes. Returns false if size is less
// than kChunkHeaderSize.
bool ReadChunkHeader(const uint8_t* chunk, size_t size, ChunkHeader* header);

// Reads a fragment size header at `p`, not reading at or past `end`. Accepts
// 1- to 4-byte varints. Returns the number of header bytes, or 0 if the varint
// is truncated by `end` or longer than 4 bytes. Inline: it runs per fragment.
inline size_t ReadFragmentSize(const uint8_t* p, const uint8_t* end, uint32_t* size) {
  // The usual redundant 4-byte form first.
  if (ReadRedundantVarInt(p, end, size)) return kFragmentHeaderSize;
  uint64_t value = 0;
  const size_t header_size = ParseVarInt(p, end, &value, kFragmentHeaderSize);
  if (header_size != 0) *size = static_cast<uint32_t>(value);
  return header_size;
}

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_CHUNK_ABI_H_
