#ifndef RINGSIDE_AGENT_SESSION_BUFFER_OWNER_H_
#define RINGSIDE_AGENT_SESSION_BUFFER_OWNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/session_buffers.h"
#include "agent/session/session_stream.h"
#include "agent/sources/source_factory.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// The threads that keep a session's buffers fed and drained:
//
//   buffer owner: every 100 ms, or when a producer whose chunk pool is half
//     in use asks (its commit request), MoveChunksIntoBuffers(); every
//     flush_period_ms Flush(); every snapshot_interval_ms a clock snapshot
//     into the first buffer; every second a look for CPUs gone offline or
//     back (CpuHotplugWatch, told as notices).
//   drain (write_into_file): every file_write_period_ms, what the readers
//     committed since the owner's last move, then the stream's write
//     (SessionStream::WriteIntoFile). Apart from the owner, so that a slow
//     disk or a compressing sink never holds up the commits readers short
//     of chunks wait for.
//
// Both wait on stop_mu_ with a timeout: a period, a stop, or (the owner) a
// commit request. MoveChunksIntoBuffers() and Flush() are called from other
// threads too (a stop, a snapshot); the buffers' lock orders them.
class BufferOwner {
 public:
  // Feeds `buffers` from the producers of `sources` (committed into each
  // slot's target buffer) and the descriptor updates of `tracker` (may be
  // null) into the durable store, on the periods of `config`. `notice` is
  // told of CPUs that went offline or came back. All outlive the owner;
  // `sources` may be filled in after this, before Start().
  BufferOwner(const config::TraceConfig& config, SessionBuffers* buffers, BuiltSources* sources,
              DescriptorTracker* tracker, std::function<void(std::string)> notice);
  BufferOwner(const BufferOwner&) = delete;
  BufferOwner& operator=(const BufferOwner&) = delete;
  // REQUIRES: Stop(), while the sources live.
  ~BufferOwner() = default;

  // Starts the buffer-owner thread and, with `drain_into` (may be null),
  // the drain thread writing into it every file_write_period_ms (which must
  // be positive then); readers whose pool runs low ask the owner to commit
  // from then on.
  void Start(SessionStream* drain_into);
  // From here on a reader that finds its pool empty drops rather than
  // waits for a commit that would not come (the sources' final drain in
  // their destructors, when the session was not stopped); both threads are
  // stopped and joined. Idempotent.
  void Stop();

  // Commits what the producers queued into the buffers (the clock
  // snapshots into the first), and the descriptor updates into the durable
  // store.
  void MoveChunksIntoBuffers();
  // A flush that never waits for a writer: what writers hold in chunks
  // still open is copied into the buffers as scraped chunks, with every
  // committed chunk. Then, when every source has read its staging rings
  // since the last Flush() asked it to (DataSource::RequestStagingPass()),
  // the durable store may pin and compact what ended before: a task's last
  // events can wait in a BPF ring, an in-kernel batch or a paused reader
  // long after its exit was committed, and its name must outlive them in
  // the ring.
  void Flush();

 private:
  void OwnerLoop();
  void DrainLoop(SessionStream* stream);
  // Owner thread (clock_writer_ is its alone): a clock snapshot (BOOTTIME,
  // MONOTONIC, REALTIME) into the first buffer, so that any window of the
  // ring has one.
  void WriteClockSnapshot();

  const config::TraceConfig& config_;
  SessionBuffers* const buffers_;
  BuiltSources* const sources_;
  DescriptorTracker* const tracker_;
  const std::function<void(std::string)> notice_;
  // The owner's own producer, of the periodic clock snapshots: written by
  // the owner thread alone, committed into the first buffer with the
  // sources' chunks. Null without buffers or with
  // disable_clock_snapshotting.
  static constexpr buffer::ProducerID kClockProducerId = 0xffff;
  std::unique_ptr<ProducerBuffer> clock_producer_;
  std::unique_ptr<TraceWriter> clock_writer_;

  // The staging passes the last Flush() asked each source for (index: slot;
  // 0: none to wait for). Flush() runs on several threads (the owner's, a
  // stop, a snapshot).
  absl::Mutex staging_mu_;
  std::vector<uint64_t> staging_passes_ ABSL_GUARDED_BY(staging_mu_);

  // What wakes the owner thread: a stop, or a commit request; the drain
  // thread: a stop.
  absl::Mutex stop_mu_;
  bool stop_requested_ ABSL_GUARDED_BY(stop_mu_) = false;
  bool commit_requested_ ABSL_GUARDED_BY(stop_mu_) = false;
  bool stopped_ = false;  // The lifecycle thread's: Stop() ran.
  std::thread owner_;
  std::thread drain_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_BUFFER_OWNER_H_
