#include "agent/session/session_buffers.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

std::vector<const buffer::TraceBuffer*> Const(const std::vector<buffer::TraceBuffer*>& buffers) {
  return std::vector<const buffer::TraceBuffer*>(buffers.begin(), buffers.end());
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionBuffers>> SessionBuffers::Create(
    const config::TraceConfig& config, uint32_t machine_id) {
  std::unique_ptr<SessionBuffers> s(new SessionBuffers());
  absl::MutexLock lock(&s->mu_);
  s->reader_.set_machine_id(machine_id);
  for (const auto& b : config.buffers()) {
    auto policy = b.fill_policy() == config::TraceConfig::BufferConfig::DISCARD
                      ? buffer::TraceBuffer::OverwritePolicy::kDiscard
                      : buffer::TraceBuffer::OverwritePolicy::kOverwrite;
    auto tb = buffer::TraceBuffer::Create(size_t{b.size_kb()} * 1024, policy);
    if (tb == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate a buffer of ", b.size_kb(), " KiB"));
    }
    s->sizes_.push_back(tb->size());
    s->buffers_.push_back(std::move(tb));
  }
  if (config.durable_buffer_size_kb() > 0 && !s->buffers_.empty()) {
    s->buffers_[0]->SetDurableStore(std::make_unique<buffer::DurableStore>(
        size_t{config.durable_buffer_size_kb()} * 1024, s->buffers_[0]->size()));
    s->durable_ = true;
  }
  // Faulted in now, beside the sources' start (loading BPF programs takes
  // longer), rather than a page at a time under the writers' commits.
  s->populator_ = std::thread([buffers = s->BuffersLocked()] {
    pthread_setname_np(pthread_self(), "rs-populate");
    for (buffer::TraceBuffer* b : buffers) b->Populate();
  });
  return s;
}

SessionBuffers::~SessionBuffers() {
  if (populator_.joinable()) populator_.join();
}

uint64_t SessionBuffers::total_size() const {
  uint64_t total = 0;
  for (uint64_t size : sizes_) total += size;
  return total;
}

std::vector<buffer::TraceBuffer*> SessionBuffers::BuffersLocked() {
  std::vector<buffer::TraceBuffer*> out;
  for (auto& b : buffers_) out.push_back(b.get());
  return out;
}

const buffer::DurableStore* SessionBuffers::DurableLocked() const {
  return durable_ ? buffers_[0]->durable() : nullptr;
}

void SessionBuffers::CommitQueued(std::vector<SourceSlot>& slots, ProducerBuffer* clock_producer,
                                  DescriptorTracker* tracker) {
  absl::MutexLock lock(&mu_);
  for (SourceSlot& slot : slots) {
    slot.producer->CommitQueuedInto(buffers_[slot.target_buffer].get());
  }
  if (clock_producer != nullptr) clock_producer->CommitQueuedInto(buffers_[0].get());
  if (tracker != nullptr) tracker->ApplyTo(buffers_[0]->durable());
}

void SessionBuffers::MarkDurableDrained() {
  if (!durable_) return;
  absl::MutexLock lock(&mu_);
  buffers_[0]->durable()->Drained(buffers_[0]->stats().bytes_written);
}

void SessionBuffers::ReadInto(std::string* out) {
  absl::MutexLock lock(&mu_);
  reader_.ReadInto(BuffersLocked(), out);
}

bool SessionBuffers::ReadSome(std::string* out, size_t max_bytes) {
  absl::MutexLock lock(&mu_);
  return reader_.ReadSome(BuffersLocked(), out, max_bytes);
}

bool SessionBuffers::ReadInBatches(size_t batch_bytes, std::string* out,
                                   absl::FunctionRef<bool()> write_batch) {
  for (uint64_t batches = total_size() / batch_bytes + 2; batches > 0; batches--) {
    const bool all_read = ReadSome(out, batch_bytes);
    if (!write_batch()) return false;
    if (all_read) break;
  }
  return true;
}

void SessionBuffers::ReadAllDescriptors(std::string* out) {
  if (!durable_) return;
  absl::MutexLock lock(&mu_);
  reader_.ReadAllDescriptors(buffers_[0]->durable(), out);
}

trace::TracePacket SessionBuffers::StatsPacket(int64_t ts,
                                               const std::vector<SourceStats>& sources) const {
  absl::MutexLock lock(&mu_);
  std::vector<const buffer::TraceBuffer*> buffers;
  for (const auto& b : buffers_) buffers.push_back(b.get());
  return TraceStatsPacket(ts, sources, buffers, DurableLocked());
}

trace::TracePacket SessionBuffers::FinalStatsPacket(int64_t ts,
                                                    const std::vector<SourceStats>& sources,
                                                    bool whole_recording, Totals* totals) {
  absl::MutexLock lock(&mu_);
  const std::vector<buffer::TraceBuffer*> buffers = BuffersLocked();
  const std::vector<EventLoss> event_losses = EventLosses(sources, reader_);
  trace::TracePacket packet = TraceStatsPacket(ts, sources, Const(buffers), DurableLocked(),
                                               whole_recording ? &event_losses : nullptr);
  *totals = Totals();
  for (const EventLoss& l : event_losses) {
    (l.stage == "chunk_pool" ? totals->events_lost_in_pool : totals->events_lost_in_buffers) +=
        l.events;
  }
  for (const buffer::TraceBuffer* b : buffers) {
    totals->chunks_overwritten += b->stats().chunks_overwritten;
    totals->chunks_discarded += b->stats().chunks_discarded;
    totals->bytes_overwritten += b->stats().bytes_overwritten;
  }
  totals->packets = reader_.packets();
  totals->events_kept = reader_.events();
  return packet;
}

std::vector<SessionBuffers::Usage> SessionBuffers::usage() const {
  absl::MutexLock lock(&mu_);
  std::vector<Usage> out;
  for (const auto& b : buffers_) out.push_back({b->stats(), b->size(), b->used_size()});
  return out;
}

std::optional<buffer::DurableStore::Stats> SessionBuffers::durable_stats() const {
  absl::MutexLock lock(&mu_);
  if (buffers_.empty() || buffers_[0]->durable() == nullptr) return std::nullopt;
  return buffers_[0]->durable()->stats();
}

absl::Status SessionBuffers::Clone(size_t step_bytes,
                                   std::vector<std::unique_ptr<buffer::TraceBuffer>>* clones) {
  std::vector<std::unique_ptr<buffer::TraceBuffer::CloneCopier>> copiers;
  {
    // The writers wait only for this: per-sequence state and stats.
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) {
      if (b->clone_in_progress()) {
        return absl::FailedPreconditionError("another snapshot is being cloned");
      }
    }
    for (const auto& b : buffers_) {
      // Everything the ring still holds, whether a streaming drain read it
      // already or not: a snapshot's window is the ring's, not what is left
      // since the last drain.
      std::unique_ptr<buffer::TraceBuffer> clone =
          b->BeginClone(buffer::TraceBuffer::CloneScope::kEverything);
      if (clone == nullptr) {
        clones->clear();
        for (const auto& other : buffers_) other->ContinueClone(1);  // Ends the abandoned ones.
        return absl::ResourceExhaustedError(absl::StrCat(
            "cannot clone a ", b->size() >> 20, " MiB buffer: out of memory or address space"));
      }
      clones->push_back(std::move(clone));
    }
    for (const auto& b : buffers_) copiers.push_back(b->clone_copier());
  }
  // The bytes follow without the writers' lock: a write meanwhile first
  // preserves what it changes (copy-on-write), waiting only for a block
  // being copied. Taking the lock for each step instead made the writers
  // block on it thousands of times per snapshot, and a blocked thread's
  // wake-up can take milliseconds on a busy (or virtual) machine.
  for (const auto& clone : *clones) clone->PrefaultCloneMemory();
  for (const auto& copier : copiers) {
    if (copier == nullptr) continue;  // Nothing to copy: complete at once.
    while (!copier->CopySome(step_bytes)) {
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& b : buffers_) b->ContinueClone(step_bytes);  // Ends it on their side.
  return absl::OkStatus();
}

}  // namespace ringside::agent
