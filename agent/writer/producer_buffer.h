#ifndef RINGSIDE_AGENT_WRITER_PRODUCER_BUFFER_H_
#define RINGSIDE_AGENT_WRITER_PRODUCER_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/writer/chunk_pool.h"
#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"

namespace ringside::agent {

// What a writer does when every chunk of its producer is in use.
enum class PoolExhaustedPolicy {
  // Drop packets until a chunk is free, count them, and mark the loss with a
  // kPacketSizeDropPacket fragment so the reader sees previous_packet_dropped.
  kDrop,
  // While a committer is attached (AttachCommitter): wait for a free chunk,
  // up to the stall timeout, then drop as kDrop does and wait no more until
  // a chunk is freed. With no committer, nobody would free one: kDrop.
  kStall,
};

// The in-process equivalent of a producer's shared-memory buffer: a bounded
// pool of fixed-size chunks shared by the producer's TraceWriters, and the
// queue through which their commits reach the thread that owns the
// TraceBuffer.
//
//   writer threads ──TraceWriter──► chunks ──Commit()──► queue
//                                                          │ CommitQueuedInto()
//                                     owner thread ◄───────┘ CopyChunkUntrusted,
//                                                            TryPatchChunkContents
//
// Thread-safe. TraceWriters must not outlive it.
class ProducerBuffer final : public ChunkPool {
 public:
  struct Options {
    size_t num_chunks = 256;  // 1 MiB of 4 KiB chunks.
    size_t chunk_size = buffer::kMinChunkSize;
    PoolExhaustedPolicy policy = PoolExhaustedPolicy::kDrop;
    absl::Duration stall_timeout = absl::Milliseconds(100);
  };

  // Counters for the trace's stats; cumulative.
  struct Stats {
    uint64_t chunks_committed = 0;
    uint64_t chunks_scraped = 0;
    uint64_t patches_committed = 0;
    uint64_t pool_exhausted = 0;  // Chunk acquisitions that found the pool empty.
    uint64_t stalls = 0;          // Waits for a free chunk (kStall).
    uint64_t stall_timeouts = 0;  // Waits that gave up and dropped.
    uint64_t stall_ns = 0;        // Total time writers waited.
    // Acquisitions that got no chunk: each drops what its writer wrote until
    // the next chunk it gets.
    uint64_t chunks_dropped() const { return pool_exhausted - stalls + stall_timeouts; }
  };

  ProducerBuffer(buffer::ProducerID producer_id, buffer::ClientIdentity identity, Options options);
  ~ProducerBuffer() override;
  ProducerBuffer(const ProducerBuffer&) = delete;
  ProducerBuffer& operator=(const ProducerBuffer&) = delete;

  // A writer for sequence {producer, writer_id}. One thread at a time uses it.
  std::unique_ptr<TraceWriter> CreateTraceWriter(buffer::WriterID writer_id);

  // Owner thread: applies every queued commit to `buffer` and returns the
  // chunks to the pool. Returns the number of entries applied.
  size_t CommitQueuedInto(buffer::TraceBuffer* buffer);

  // Service side of a flush that must not wait for the writers: commits a copy
  // of every chunk still being written, as a scraped (incomplete) chunk. The
  // writers' own later commits complete them.
  void ScrapeWriters();

  // The owner thread commits this producer's queue from now on. `request`
  // is called, from a writer's thread under the pool's lock, when as many
  // chunks wait in the queue as are free, and not again until the next
  // commit: the owner should commit now rather than at its next period, so
  // that a fast writer finds chunks. It must only note the request.
  void AttachCommitter(std::function<void()> request);
  // No more commit requests, and no more stalls (a stalled writer drops):
  // before the owner thread stops. Once it returns, `request` is not called.
  void DetachCommitter();

  Stats stats() const;
  size_t chunk_size() const override { return options_.chunk_size; }
  const Options& options() const { return options_; }
  buffer::ProducerID producer_id() const { return producer_id_; }

  // ChunkPool, for its TraceWriters. AcquireChunk() waits up to the stall
  // timeout under kStall before it returns nullptr.
  uint8_t* AcquireChunk() override;
  void Enqueue(CommitEntry entry) override;
  void Unregister(TraceWriter* writer) override;

 private:
  void ReleaseChunk(uint8_t* chunk);

  const buffer::ProducerID producer_id_;
  const buffer::ClientIdentity identity_;
  const Options options_;
  std::unique_ptr<uint8_t[]> memory_;

  mutable absl::Mutex mu_;
  absl::CondVar chunk_freed_;
  std::vector<uint8_t*> free_chunks_ ABSL_GUARDED_BY(mu_);
  std::deque<CommitEntry> queue_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Committed chunks not yet back in the pool.
  size_t queued_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> commit_request_ ABSL_GUARDED_BY(mu_);
  // The commit request was made and the queue not committed since.
  bool commit_requested_ ABSL_GUARDED_BY(mu_) = false;
  // A stall timed out and no chunk was freed since: the owner is stuck, and
  // a writer waiting again would only slow its reader down.
  bool stall_gave_up_ ABSL_GUARDED_BY(mu_) = false;

  // The writers, for scraping. Lock order: writers_mu_, then a writer's own
  // chunk lock, then mu_.
  absl::Mutex writers_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<TraceWriter*> writers_ ABSL_GUARDED_BY(writers_mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_WRITER_PRODUCER_BUFFER_H_
