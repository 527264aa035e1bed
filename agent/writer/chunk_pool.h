#ifndef RINGSIDE_AGENT_WRITER_CHUNK_POOL_H_
#define RINGSIDE_AGENT_WRITER_CHUNK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"

namespace ringside::agent {

class TraceWriter;

// One chunk commit, patch batch or scraped copy on its way to the buffer.
struct CommitEntry {
  enum class Kind { kChunk, kScrapedChunk, kPatches };
  Kind kind = Kind::kChunk;
  buffer::WriterID writer_id = 0;
  // kChunk: a pool chunk (header + payload), returned to the pool once copied.
  uint8_t* chunk = nullptr;
  // kScrapedChunk: a copy of a chunk still being written (header + payload).
  std::vector<uint8_t> scraped;
  // kPatches.
  buffer::ChunkID chunk_id = 0;
  std::vector<buffer::TraceBuffer::Patch> patches;
  bool other_patches_pending = false;
};

// What a TraceWriter asks of the pool of chunks it writes through: a free
// chunk, the queue its commits and patches go into, and its leaving.
// ProducerBuffer is the pool; it makes its writers and scrapes them, so the
// writer knows it only through this. Thread-safe.
class ChunkPool {
 public:
  virtual ~ChunkPool() = default;

  // The size of every chunk, header included; never changes.
  virtual size_t chunk_size() const = 0;
  // A free chunk, or nullptr when the pool is exhausted.
  virtual uint8_t* AcquireChunk() = 0;
  // Queues a commit, a scraped copy or patches for the buffer's owner.
  virtual void Enqueue(CommitEntry entry) = 0;
  // `writer` is going away: no more scraping of it.
  virtual void Unregister(TraceWriter* writer) = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_WRITER_CHUNK_POOL_H_
