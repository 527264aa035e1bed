#include "agent/writer/producer_buffer.h"

#include <algorithm>

#include "agent/writer/trace_writer.h"

namespace ringside::agent {

ProducerBuffer::ProducerBuffer(buffer::ProducerID producer_id, buffer::ClientIdentity identity,
                               Options options)
    : producer_id_(producer_id), identity_(identity), options_(options) {
  memory_.reset(new uint8_t[options_.num_chunks * options_.chunk_size]());
  absl::MutexLock lock(&mu_);
  free_chunks_.reserve(options_.num_chunks);
  // Hand chunks out from the start of the pool first (pop_back).
  for (size_t i = options_.num_chunks; i > 0; i--) {
    free_chunks_.push_back(memory_.get() + (i - 1) * options_.chunk_size);
  }
}

ProducerBuffer::~ProducerBuffer() = default;

std::unique_ptr<TraceWriter> ProducerBuffer::CreateTraceWriter(buffer::WriterID writer_id) {
  auto writer = std::make_unique<TraceWriter>(this, writer_id);
  absl::MutexLock lock(&writers_mu_);
  writers_.push_back(writer.get());
  return writer;
}

void ProducerBuffer::Unregister(TraceWriter* writer) {
  absl::MutexLock lock(&writers_mu_);
  writers_.erase(std::remove(writers_.begin(), writers_.end(), writer), writers_.end());
}

void ProducerBuffer::AttachCommitter(std::function<void()> request) {
  absl::MutexLock lock(&mu_);
  commit_request_ = std::move(request);
  commit_requested_ = false;
}

void ProducerBuffer::DetachCommitter() {
  absl::MutexLock lock(&mu_);
  commit_request_ = nullptr;
  chunk_freed_.SignalAll();
}

uint8_t* ProducerBuffer::AcquireChunk() {
  absl::MutexLock lock(&mu_);
  // Asked for when half the chunks writers are not holding wait for the
  // owner, not when the pool is empty: the owner thread may take a while to
  // run on a busy machine, and the writer goes on filling the other half.
  if (commit_request_ && !commit_requested_ && free_chunks_.size() <= queued_chunks_) {
    commit_requested_ = true;
    commit_request_();
  }
  if (free_chunks_.empty()) {
    stats_.pool_exhausted++;
    if (options_.policy == PoolExhaustedPolicy::kDrop || !commit_request_ || stall_gave_up_) {
      return nullptr;
    }
    stats_.stalls++;
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + options_.stall_timeout;
    while (free_chunks_.empty() && commit_request_) {
      if (chunk_freed_.WaitWithDeadline(&mu_, deadline)) break;
    }
    stats_.stall_ns += static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - start));
    if (free_chunks_.empty()) {
      stats_.stall_timeouts++;
      stall_gave_up_ = true;
      return nullptr;
    }
  }
  uint8_t* chunk = free_chunks_.back();
  free_chunks_.pop_back();
  return chunk;
}

void ProducerBuffer::ReleaseChunk(uint8_t* chunk) {
  absl::MutexLock lock(&mu_);
  free_chunks_.push_back(chunk);
  queued_chunks_--;
  stall_gave_up_ = false;
  chunk_freed_.Signal();
}

void ProducerBuffer::Enqueue(CommitEntry entry) {
  absl::MutexLock lock(&mu_);
  switch (entry.kind) {
    case CommitEntry::Kind::kChunk:
      stats_.chunks_committed++;
      queued_chunks_++;
      break;
    case CommitEntry::Kind::kScrapedChunk:
      stats_.chunks_scraped++;
      break;
    case CommitEntry::Kind::kPatches:
      stats_.patches_committed += entry.patches.size();
      break;
  }
  queue_.push_back(std::move(entry));
}

size_t ProducerBuffer::CommitQueuedInto(buffer::TraceBuffer* buffer) {
  std::deque<CommitEntry> entries;
  {
    absl::MutexLock lock(&mu_);
    entries.swap(queue_);
    // What is committed from now on needs a commit of its own: a request
    // made while this one runs wakes the owner again.
    commit_requested_ = false;
  }
  const size_t payload_size = options_.chunk_size - buffer::kChunkHeaderSize;
  for (CommitEntry& e : entries) {
    switch (e.kind) {
      case CommitEntry::Kind::kChunk:
      case CommitEntry::Kind::kScrapedChunk: {
        const bool scraped = e.kind == CommitEntry::Kind::kScrapedChunk;
        const uint8_t* chunk = scraped ? e.scraped.data() : e.chunk;
        buffer::ChunkHeader header;
        buffer::ReadChunkHeader(chunk, options_.chunk_size, &header);
        // The writer id is the one of the writer that committed, not what the
        // chunk says.
        buffer->CopyChunkUntrusted(producer_id_, identity_, e.writer_id, header.chunk_id,
                                   header.num_fragments, header.flags, /*chunk_complete=*/!scraped,
                                   chunk + buffer::kChunkHeaderSize, payload_size);
        if (!scraped) ReleaseChunk(e.chunk);
        break;
      }
      case CommitEntry::Kind::kPatches:
        buffer->TryPatchChunkContents(producer_id_, e.writer_id, e.chunk_id, e.patches.data(),
                                      e.patches.size(), e.other_patches_pending);
        break;
    }
  }
  return entries.size();
}

void ProducerBuffer::ScrapeWriters() {
  absl::MutexLock lock(&writers_mu_);
  for (TraceWriter* writer : writers_) writer->Scrape();
}

ProducerBuffer::Stats ProducerBuffer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace ringside::agent
