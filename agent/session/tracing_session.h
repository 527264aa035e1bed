#ifndef RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_
#define RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/buffer_owner.h"
#include "agent/session/machine_identity.h"
#include "agent/session/service_packets.h"
#include "agent/session/session_buffers.h"
#include "agent/session/session_snapshot.h"
#include "agent/session/session_stream.h"
#include "agent/sources/data_source.h"
#include "agent/sources/incident.h"
#include "agent/sources/source_factory.h"
#include "agent/tracefile/trace_sink.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

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
// Its parts, each with its header: SessionBuffers (the buffers, the durable
// store and their reader, under one lock), BufferOwner (the owner and drain
// threads), SessionStream (write_into_file: the periodic write and the
// files it is cut into), SessionSnapshot (a clone, written on its own). The
// session itself holds the sources, the states and the files' own packets.
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
    DataSource::StackReport stacks;
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
  bool file_limit_reached() const { return stream_ != nullptr && stream_->file_limit_reached(); }
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
  // Called, from whichever thread, when the session has something for
  // whoever waits on it: a notice to take, or file_limit_reached() turned
  // true. So the waiter sleeps until then instead of looking every few
  // hundred milliseconds. Set before Start(); it must neither block nor
  // call the session.
  void SetAttentionHook(std::function<void()> hook) { attention_ = std::move(hook); }

 private:
  explicit TracingSession(config::TraceConfig config) : config_(std::move(config)) {}
  bool streaming() const { return config_.write_into_file(); }
  // The buffer owner's threads (and the producers' commit requests to it),
  // then the stream's state is the calling thread's again.
  void StopOwner();
  // Start() and StartIntoFiles(): `rotating` is `stream` or null.
  absl::Status StartWith(TraceSink* stream, RotatingSink* rotating);
  // `fresh_scan`: without the durable store, a /proc scan of now rather
  // than the one of the session's start (a later file of a stream).
  void AppendPreamble(std::string* out, bool fresh_scan = false);
  // WriteTrace()'s end of the trace, after the buffers' last packets: a
  // /proc scan, the clock snapshot, trace_stats (into *summary, what the
  // buffers read and lost) and tracing_disabled at `end_ns`.
  void AppendTrailer(int64_t end_ns, bool whole_recording, std::string* out, Summary* summary);
  // Frames a packet of the session's own and counts it (service_packets_).
  void AppendOwnPacket(trace::TracePacket packet, std::string* out);
  // A /proc scan, and the labels of its processes in pods (PodLabelsPackets).
  void AppendProcessScan(trace::TracePacket scan, std::string* out);
  std::vector<SourceStats> CollectSourceStats() const;
  std::vector<SourceReport> CollectSourceReports() const;
  void Notice(std::string message);

  config::TraceConfig config_;
  std::atomic<State> state_{State::kConfigured};
  // Read at Create(); every packet of every file carries its id.
  MachineIdentity machine_;
  // Descriptor tracking for the durable store beside buffers_[0] (null:
  // off). Declared before the sources, which report to it, so it outlives
  // them.
  std::unique_ptr<DescriptorTracker> tracker_;
  // The buffers, the durable store and their reader, under their lock.
  std::unique_ptr<SessionBuffers> buffers_;
  // The buffer-owner and drain threads. Declared before the sources, whose
  // reader threads make commit requests to it, so it outlives them.
  std::unique_ptr<BufferOwner> owner_;
  BuiltSources sources_;
  std::vector<std::string> warnings_;
  // Staging losses, kept from Stop() on, when the sources are gone.
  std::vector<SourceStats> final_source_stats_;
  std::vector<SourceReport> final_source_reports_;
  uint64_t final_events_seen_ = 0, final_events_lost_ = 0;

  // write_into_file: the streaming side, made by Start() before the
  // threads (null otherwise). Its state is Start()'s thread's, then the
  // drain thread's, then the thread that stopped them (WriteTrace).
  std::unique_ptr<SessionStream> stream_;
  // The packets of the session's own in the files: Start()'s thread's,
  // then the drain thread's (each new file's preamble), then WriteTrace()'s.
  uint64_t service_packets_ = 0;

  absl::Mutex notices_mu_;
  std::vector<std::string> notices_ ABSL_GUARDED_BY(notices_mu_);
  std::function<void()> attention_;  // Set before Start(), then read only.

  int64_t start_boottime_ns_ = 0;
  trace::TracePacket start_clocks_;
  trace::TracePacket start_processes_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_TRACING_SESSION_H_
