#ifndef RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_
#define RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/buffer_reader.h"
#include "agent/session/machine_identity.h"
#include "agent/session/service_packets.h"
#include "agent/sources/data_source.h"
#include "agent/sources/incident.h"
#include "agent/sources/source_factory.h"
#include "agent/tracefile/trace_sink.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "base/owner_thread.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

class SessionSnapshot;

// What made a snapshot be taken, written into its file as the
// clone_snapshot_trigger packet (Perfetto's Trigger).
struct SnapshotTrigger {
  std::string name;           // The trigger's name ("manual", "oom_kill", a config's).
  std::string producer_name;  // Who fired it ("ringside snapshot", "bpf.incidents").
  int32_t uid = 0;            // The requester's uid, from trusted credentials.
  int64_t boottime_ns = 0;    // When it fired, on the trace's clock (BOOTTIME).
};

// One tracing session (Perfetto's TracingSession): the configured buffers,
// the durable store beside the first one, the data sources feeding them and
// the thread that owns the buffers. `ringside record` runs one session
// once; the agent keeps one running.
//
//   data source threads ──TraceWriter──► ProducerBuffer (chunks)
//        ──buffer-owner thread: MoveChunksIntoBuffers() every 100 ms──► TraceBuffers
//   every flush_period_ms: Flush() (scrape open chunks; durable compaction)
//   write_into_file, every file_write_period_ms on a drain thread of its own:
//        TraceBuffers ──► the stream sink (which may compress: CompressingSink)
//
// The drain is not the owner's work: a slow disk or a compressing sink would
// otherwise hold up the commits that readers short of chunks wait for.
//
// States, in order only:
//   kConfigured ─Start()─► kStarted ─Stop()─► kStopping ─► kStopped
// ReadBuffers() and CloneSnapshot() while started or stopped; WriteTrace()
// once, after Stop().
//
// A file written by the session holds, in order: the preamble (uuid,
// system_info, the start clock_snapshot, the effective config, a /proc scan
// unless the durable store names every task, tracing_started), the buffers'
// packets (the durable descriptors first), and the trailer (a /proc scan,
// the end clock_snapshot, trace_stats, tracing_disabled).
class TracingSession {
 public:
  enum class State { kConfigured, kStarted, kStopping, kStopped };

  struct Progress {
    double elapsed_s = 0;
    uint64_t events = 0;
    uint64_t bytes_written = 0;  // Into the buffers.
    uint64_t buffer_size = 0;
    uint64_t bytes_lost = 0;  // Overwritten unread in the buffers.
    // Lost before the buffers: BPF reserve failures, ftrace lost events.
    uint64_t events_lost = 0;
  };

  // What a finished trace holds and lost, for the closing lines.
  struct Summary {
    uint64_t packets = 0;
    uint64_t file_bytes = 0;
    uint64_t events_seen = 0;  // Read from the staging rings.
    uint64_t events_kept = 0;  // In the file.
    // Lost, by stage: before the buffers (BPF ring reserve failures, ftrace
    // overruns), chunk pools that stayed empty 100 ms (each drops a packet
    // or more), overwritten in a RING_BUFFER before being read, refused by a
    // full DISCARD buffer.
    uint64_t events_lost = 0;
    uint64_t chunks_dropped = 0;
    uint64_t chunks_overwritten = 0;
    uint64_t bytes_overwritten = 0;
    uint64_t chunks_discarded = 0;
    // The same two in events, where the sources count them: in packets
    // dropped for want of a chunk, and committed into the buffers but not
    // read (overwritten, discarded).
    uint64_t events_lost_in_pool = 0;
    uint64_t events_lost_in_buffers = 0;
  };

  // How the session is doing, for the agent's status: each data source of
  // the config, each buffer, the durable store.
  struct SourceReport {
    enum class State { kRunning, kStopped, kFailed };
    std::string name;
    State state = State::kRunning;
    std::string error;  // kFailed: why it could not load or start.
    uint64_t events = 0;
    std::vector<DataSource::Loss> losses;
    DataSource::ConsumerCpu consumer;
    DataSource::StagingMemory staging;
    uint64_t chunk_pool_bytes = 0;  // Its producer's pool of chunks.
  };
  struct BufferReport {
    buffer::TraceBuffer::Stats stats;
    uint64_t used_bytes = 0;  // Of stats.buffer_size, holding data now.
  };
  struct Report {
    std::vector<SourceReport> sources;
    std::vector<BufferReport> buffers;
    std::optional<buffer::DurableStore::Stats> durable;
  };

  // Allocates the buffers and loads the data sources (not started). Every
  // default of `config` is applied first (ApplyDefaults). `incidents` (may
  // be null; outlives the session) is told of the incidents the sources
  // read, on their threads.
  static absl::StatusOr<std::unique_ptr<TracingSession>> Create(
      config::TraceConfig config, IncidentListener* incidents = nullptr);
  ~TracingSession();

  // An upper bound of the size of a whole-file trace of `config`: what the
  // buffers hold, re-framed (a few bytes more per packet), the durable
  // descriptors and two /proc scans; reserved before recording starts.
  static uint64_t MaxTraceBytes(const config::TraceConfig& config);

  // Starts the sources and the buffer-owner thread. With write_into_file,
  // `stream` (which must outlive the session) gets the preamble now and,
  // from the drain thread, the buffers every file_write_period_ms.
  absl::Status Start(TraceSink* stream = nullptr);
  // The same, streaming into files one after another (the agent's rotating
  // drain): when `files` says a file is due, the current one is ended with
  // a clock snapshot and trace_stats and the next begun with the preamble
  // and every descriptor of the durable store, so each opens alone; the
  // config's max_file_size_bytes is then the sink's to apply, not a stop.
  absl::Status StartIntoFiles(RotatingSink* files);
  // A flush that never waits for a writer: what writers hold in chunks still
  // open is copied into the buffers as scraped chunks, with every committed
  // chunk. Then the durable store may compact what ended before it.
  void Flush();
  // Writes what the buffers hold that was not read before into `sink`.
  absl::Status ReadBuffers(TraceSink* sink);
  // How long CloneSnapshot() waits, over all sources together, for the
  // sources' readers to empty their staging rings.
  static constexpr absl::Duration kStagingFlushLimit = absl::Milliseconds(100);
  // Bytes of a buffer CloneSnapshot()'s copier takes at a time (without
  // the writers' lock; see TraceBuffer::CloneCopier).
  static constexpr size_t kCloneStepBytes = 256 << 10;

  // A read-only copy of the buffers and the durable store as of now, to be
  // written (SessionSnapshot::WriteTo) while the session records on, for
  // `trigger`: all the buffers hold, including what a streaming drain has
  // read already (TraceBuffer::CloneScope::kEverything). Fresh to the moment of the call: while
  // started, every running source's reader first reads what its staging rings hold (within
  // kStagingFlushLimit; a source that misses it is counted in
  // SessionSnapshot::sources_not_flushed()), then the writers' open chunks
  // are scraped. The buffers are cloned copy-on-write: writers wait for the
  // lock only while per-sequence state is copied, then at most for one
  // 64 KiB block they are about to change (see TraceBuffer::BeginClone and
  // CloneCopier). Fails if memory
  // for the clone cannot be mapped; one clone at a time.
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> CloneSnapshot(const SnapshotTrigger& trigger);
  // Stops every source (all they saw committed), the owner and drain threads, and
  // moves the rest into the buffers; the sources' kernel state is removed.
  absl::Status Stop();
  // After Stop(): the rest of the trace into `sink`, which is finished.
  // A whole file gets everything; the stream given to Start() the buffers'
  // last packets and the trailer. REQUIRES: the thread that called Stop()
  // (the stream's state is its own from then on: OwnerThread).
  absl::StatusOr<Summary> WriteTrace(TraceSink* sink);

  State state() const { return state_.load(); }
  Progress progress() const;
  // Not while Stop() runs on another thread (it takes the sources away).
  Report report() const;
  const config::TraceConfig& config() const { return config_; }
  // When Start() started the sources (CLOCK_BOOTTIME ns); set before any
  // other thread runs.
  int64_t start_boottime_ns() const { return start_boottime_ns_; }
  // Streaming only: the file reached the config's max_file_size_bytes; the
  // caller should stop the session.
  bool file_limit_reached() const { return file_limit_reached_.load(); }
  // Data sources that could not start, with why (the rest keep recording).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Incidents are reported, by BPF or by ftrace in its place (see
  // BuiltSources).
  bool incidents_reported() const { return sources_.incidents_reported; }
  // tracefs was not mounted and could not be mounted in a mount namespace
  // of our own, so it was mounted for the whole system; Stop() unmounts it
  // (which needs CAP_SYS_ADMIN). Valid after Start().
  bool mounted_tracefs_for_everyone() const { return sources_.mounted_tracefs_for_everyone(); }
  // What went wrong (and right again) while recording, e.g. a full disk
  // under a streaming file, since the last call.
  std::vector<std::string> TakeNotices();

 private:
  explicit TracingSession(config::TraceConfig config) : config_(std::move(config)) {}
  bool streaming() const { return config_.write_into_file(); }
  // The buffer-owner thread, and the producers' commit requests to it; the
  // drain thread when streaming.
  void StartOwner();
  void StopOwner();
  // Owner thread: moves chunks and flushes on their periods, to the
  // millisecond, and moves chunks whenever a producer asks, until Stop().
  void BufferOwnerLoop();
  // Drain thread (write_into_file): every file_write_period_ms until
  // Stop(), moves what the readers committed into the buffers (as the owner
  // does, under the same lock) and WriteIntoFile().
  void DrainLoop();
  // Commits what the producers queued into the buffers (the clock
  // snapshots into the first), and the descriptor updates into the durable
  // store.
  void MoveChunksIntoBuffers();
  // Owner thread (clock_writer_ is its alone): a clock snapshot (BOOTTIME,
  // MONOTONIC, REALTIME) into the first buffer, every
  // builtin_data_sources.snapshot_interval_ms (10 s), so that any window of
  // the ring has one.
  void WriteClockSnapshot();
  // write_into_file: a periodic write of the buffers into the stream. When
  // the write fails (a full disk), the packets read are kept and retried
  // first the next time, and nothing more is read from the buffers
  // meanwhile: they keep the newest data, their overwrites counted.
  // A file whose max age has passed is then finished and the next begun,
  // unless `end_of_recording`: the trailer still has to go into it, and a
  // file begun for the trailer alone would hold no event.
  void WriteIntoFile(bool end_of_recording = false);
  absl::Status WriteToStream(const std::string& bytes);
  // Rotation (rotating_ only): the trailer of the current file; then the
  // next file and its preamble (queued in stream_pending_), false while no
  // file can be opened (retried each period).
  void EndStreamFile();
  bool BeginStreamFile();
  // Writes whole packets into the stream; a rotating stream's file is ended
  // at max_file_size_bytes, between two packets, and the rest goes into
  // the next. False when a write failed (said once): the rest is then in
  // stream_pending_, as it is when no next file could be opened
  // (stream_needs_file_).
  bool StreamOut(std::string data);
  // `fresh_scan`: without the durable store, a /proc scan of now rather
  // than the one of the session's start (a later file of a stream).
  void AppendPreamble(std::string* out, bool fresh_scan = false);
  std::vector<SourceStats> CollectSourceStats() const;
  std::vector<SourceReport> CollectSourceReports() const;
  std::vector<buffer::TraceBuffer*> BuffersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notice(std::string message);

  config::TraceConfig config_;
  std::atomic<State> state_{State::kConfigured};
  // Read at Create(); every packet of every file carries its id.
  MachineIdentity machine_;
  TraceSink* stream_ = nullptr;
  RotatingSink* rotating_ = nullptr;  // stream_, when it is cut into files.
  // Drain thread: the current file was ended and no next one is open yet;
  // opening it failed (said once, until it works again).
  bool stream_needs_file_ = false;
  bool stream_file_failed_ = false;
  // A write failed; stream_pending_ holds what it could not write.
  bool stream_write_failed_ = false;
  // Descriptor tracking for the durable store beside buffers_[0] (null:
  // off). Declared before the sources, which report to it, so it outlives
  // them.
  std::unique_ptr<DescriptorTracker> tracker_;
  // What wakes the owner thread: a stop, or a producer whose chunk pool is
  // half in use (its commit request); the drain thread: a stop. Declared before the sources, whose
  // reader threads make the requests, so it outlives them.
  absl::Mutex stop_mu_;
  bool stop_requested_ ABSL_GUARDED_BY(stop_mu_) = false;
  bool commit_requested_ ABSL_GUARDED_BY(stop_mu_) = false;
  BuiltSources sources_;
  // The session's own producer, of the periodic clock snapshots: written by
  // the owner thread alone, committed into buffers_[0] with the sources'
  // chunks. Null without buffers or with disable_clock_snapshotting.
  static constexpr buffer::ProducerID kClockProducerId = 0xffff;
  std::unique_ptr<ProducerBuffer> clock_producer_;
  std::unique_ptr<TraceWriter> clock_writer_;
  std::vector<std::string> warnings_;
  // Staging losses, kept from Stop() on, when the sources are gone.
  std::vector<SourceStats> final_source_stats_;
  std::vector<SourceReport> final_source_reports_;
  uint64_t final_events_seen_ = 0, final_events_lost_ = 0;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<buffer::TraceBuffer>> buffers_ ABSL_GUARDED_BY(mu_);
  BufferPacketReader reader_ ABSL_GUARDED_BY(mu_);
  // The stream's state (service_packets_, stream_pending_, the stream_*
  // flags and the sinks' write side): Start()'s thread, then the drain
  // thread's, then the thread that stopped them (WriteTrace).
  base::OwnerThread stream_state_{"the session's stream state"};
  uint64_t service_packets_ = 0;
  // Read from the buffers, not yet written: the write failed. Drain thread
  // (WriteTrace once it has stopped).
  std::string stream_pending_;
  std::atomic<bool> file_limit_reached_{false};

  absl::Mutex notices_mu_;
  std::vector<std::string> notices_ ABSL_GUARDED_BY(notices_mu_);

  std::thread owner_;
  std::thread drain_;
  int64_t start_boottime_ns_ = 0;
  trace::TracePacket start_clocks_;
  trace::TracePacket start_processes_;
};

// A session's buffers cloned at one moment (CLONE_SNAPSHOT): written to a
// file of its own, as a complete trace, while the session records on.
class SessionSnapshot {
 public:
  // Writes the clone as a whole trace into `sink` and finishes it: the
  // preamble (with the session's start clocks), the clone_snapshot_trigger
  // packet (once), the buffers' data, the clock snapshot and trace_stats of
  // the clone.
  absl::Status WriteTo(TraceSink* sink);
  // Joins `extra` (what only the snapshot's writer knows: the agent's
  // trigger tally, the triggers the file answers) to the trace_stats the
  // file ends with; one stats packet, as Perfetto's importer keeps one.
  // Before WriteTo().
  void MergeIntoStats(const trace::TraceStats& extra) {
    stats_.mutable_trace_stats()->MergeFrom(extra);
  }
  int64_t cloned_at_ns() const { return cloned_at_ns_; }
  const SnapshotTrigger& trigger() const { return trigger_; }
  // Running sources whose staging rings were not read within the limit
  // before the clone: their last events may be missing.
  int sources_not_flushed() const { return sources_not_flushed_; }
  // WriteTo() hands the sink this much at a time: a snapshot of a large
  // buffer is never a second copy of it in memory.
  static constexpr size_t kWriteBatchBytes = 1 << 20;

 private:
  friend class TracingSession;
  SessionSnapshot() = default;
  config::TraceConfig config_;
  MachineIdentity machine_;
  std::vector<std::unique_ptr<buffer::TraceBuffer>> buffers_;
  bool durable_ = false;
  int64_t started_at_ns_ = 0;
  int64_t cloned_at_ns_ = 0;
  SnapshotTrigger trigger_;
  int sources_not_flushed_ = 0;
  trace::TracePacket start_clocks_;  // The session's, at its start.
  trace::TracePacket clocks_;        // At the clone.
  trace::TracePacket stats_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_
