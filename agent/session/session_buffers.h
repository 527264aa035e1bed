#ifndef RINGSIDE_AGENT_SESSION_SESSION_BUFFERS_H_
#define RINGSIDE_AGENT_SESSION_SESSION_BUFFERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/buffer_reader.h"
#include "agent/session/service_packets.h"
#include "agent/sources/source_factory.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// A session's trace buffers, the durable store beside the first one, and
// the reader that frames what they hold for the session's file, under one
// lock (mu_): a TraceBuffer is not thread-safe. Every use of the buffers
// goes through a method here, each taking the lock for as long as it needs
// it and never across a file's write: a read in batches lets go between
// them, and a clone copies its bytes without the lock (copy-on-write).
//
// Threading: any thread. The buffers are allocated at Create() and never
// replaced, so their number and sizes are read without the lock. Create()
// starts a thread that faults in the buffers' memory (TraceBuffer::
// Populate(), without the lock) while the sources start, so the writers'
// first pass does not pay a page fault every 4 KiB; it ends when done, or
// is waited for by the destructor.
class SessionBuffers {
 public:
  // One TraceBuffer per buffer of `config` and, with durable_buffer_size_kb
  // and at least one buffer, the durable store beside the first: read
  // first, its descriptors come before any event of any buffer. Every
  // packet read carries `machine_id` (MachineIdentity; 0: none). Fails
  // with kResourceExhausted when a buffer cannot be allocated.
  static absl::StatusOr<std::unique_ptr<SessionBuffers>> Create(const config::TraceConfig& config,
                                                                uint32_t machine_id);
  ~SessionBuffers();
  SessionBuffers(const SessionBuffers&) = delete;
  SessionBuffers& operator=(const SessionBuffers&) = delete;

  size_t count() const { return sizes_.size(); }
  bool has_durable_store() const { return durable_; }
  // The sum of the buffers' sizes, in bytes.
  uint64_t total_size() const;

  // Commits what each slot's producer queued into its target buffer, what
  // `clock_producer` queued (may be null) into the first, and the
  // descriptor updates of `tracker` (may be null) into the durable store.
  void CommitQueued(std::vector<SourceSlot>& slots, ProducerBuffer* clock_producer,
                    DescriptorTracker* tracker);
  // Everything written before now is in the buffers: the durable store may
  // pin the ends it was told of to this position. No-op without one.
  void MarkDurableDrained();

  // Appends every packet not read before (BufferPacketReader::ReadInto).
  void ReadInto(std::string* out);
  // The same, in a batch of `max_bytes` or more; true when everything was
  // read (BufferPacketReader::ReadSome).
  bool ReadSome(std::string* out, size_t max_bytes);
  // Reads what was not read before into *out in batches of `batch_bytes`
  // or more, the lock let go between them (a snapshot or a status request
  // waits for one batch, not for the whole read): after each batch,
  // `write_batch` takes it (it may clear *out) and returns false to stop.
  // Bounded (the buffers' size over batch_bytes, plus two batches), so that
  // it ends however fast writers fill the buffers. Returns false when
  // `write_batch` stopped it.
  bool ReadInBatches(size_t batch_bytes, std::string* out, absl::FunctionRef<bool()> write_batch);
  // Every descriptor of the durable store, marked read: the start of a new
  // file of a stream. No-op without a durable store.
  void ReadAllDescriptors(std::string* out);

  // A trace_stats packet at `ts` of `sources` and of the buffers as they
  // are now.
  trace::TracePacket StatsPacket(int64_t ts, const std::vector<SourceStats>& sources) const;
  // What the reader read and the buffers lost, for a recording's summary.
  struct Totals {
    uint64_t packets = 0;      // Read out of the buffers.
    uint64_t events_kept = 0;  // In those packets.
    uint64_t chunks_overwritten = 0;
    uint64_t bytes_overwritten = 0;
    uint64_t chunks_discarded = 0;
    uint64_t events_lost_in_pool = 0;
    uint64_t events_lost_in_buffers = 0;
  };
  // The trace_stats packet that ends a recording, once everything was
  // read: with `whole_recording`, the events each source wrote that the
  // reader did not read (ringside_event_loss; left out of a file that holds
  // part of the recording, where it could not be told). Sets *totals.
  trace::TracePacket FinalStatsPacket(int64_t ts, const std::vector<SourceStats>& sources,
                                      bool whole_recording, Totals* totals);

  // Each buffer's stats and the bytes it holds now, for the session's
  // report and progress.
  struct Usage {
    buffer::TraceBuffer::Stats stats;
    uint64_t size = 0;
    uint64_t used_bytes = 0;
  };
  std::vector<Usage> usage() const;
  std::optional<buffer::DurableStore::Stats> durable_stats() const;

  // A copy of everything every buffer holds (TraceBuffer::CloneScope::
  // kEverything), as of the call, into *clones, one per buffer. The lock is
  // held while each buffer's per-sequence state is copied; the bytes follow
  // without it, `step_bytes` at a time (TraceBuffer::CloneCopier), writers
  // preserving what they change meanwhile. Fails with kFailedPrecondition
  // while another clone is under way, and with kResourceExhausted when
  // memory for a clone cannot be mapped (nothing is cloned then).
  absl::Status Clone(size_t step_bytes, std::vector<std::unique_ptr<buffer::TraceBuffer>>* clones);

 private:
  SessionBuffers() = default;
  std::vector<buffer::TraceBuffer*> BuffersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const buffer::DurableStore* DurableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::vector<uint64_t> sizes_;  // Of each buffer, in bytes; set at Create().
  bool durable_ = false;         // A durable store beside buffers_[0].

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<buffer::TraceBuffer>> buffers_ ABSL_GUARDED_BY(mu_);
  BufferPacketReader reader_ ABSL_GUARDED_BY(mu_);
  std::thread populator_;  // TraceBuffer::Populate() of each buffer, once.
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_SESSION_BUFFERS_H_
