#ifndef RINGSIDE_AGENT_SESSION_RECORDING_H_
#define RINGSIDE_AGENT_SESSION_RECORDING_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/files/output_file.h"
#include "agent/sources/bpf_data_source.h"
#include "agent/sources/ftrace_data_source.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "ftrace/tracefs.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// One recording session: the configured buffers, the data sources feeding
// them, and the trace file written at the end.
//
//   data source threads ──► ProducerBuffer ──(owner thread, every 100 ms)──► TraceBuffers
//   StopAndWrite(): stop sources, drain, write file (temp name, fsync, rename)
//
// The file holds, in order: trace_uuid, system_info, the start clock_snapshot,
// the effective trace_config, a process_tree of /proc at start,
// service_event(tracing_started), every buffer's packets (with their
// trusted_packet_sequence_id and previous_packet_dropped), a process_tree at
// the end, the end clock_snapshot, trace_stats and service_event(tracing_disabled).
class Recording {
 public:
  struct Progress {
    double elapsed_s = 0;
    uint64_t events = 0;
    uint64_t bytes_written = 0;  // Into the buffers.
    uint64_t buffer_size = 0;
    uint64_t bytes_lost = 0;  // Overwritten unread in the buffers.
    // Lost before the buffers: BPF reserve failures, ftrace lost events.
    uint64_t events_lost = 0;
  };

  // What a finished recording holds and lost, for the closing lines.
  struct Summary {
    uint64_t packets = 0;
    uint64_t file_bytes = 0;
    uint64_t events_seen = 0;  // Read from the staging rings.
    uint64_t events_kept = 0;  // In the file.
    // Lost, by stage: before the buffers (BPF ring reserve failures, ftrace
    // overruns), chunk pools found empty (each drops a packet or more),
    // overwritten in a RING_BUFFER before being read, refused by a full
    // DISCARD buffer.
    uint64_t events_lost = 0;
    uint64_t chunks_dropped = 0;
    uint64_t chunks_overwritten = 0;
    uint64_t bytes_overwritten = 0;
    uint64_t chunks_discarded = 0;
  };

  // Opens the output (OutputFile: refused paths and a disk too full fail
  // here, before anything is recorded) and loads the data sources.
  static absl::StatusOr<std::unique_ptr<Recording>> Create(const config::TraceConfig& config,
                                                           const std::string& output_path);
  ~Recording();

  absl::Status Start();
  // Stops every source, drains them and writes the file.
  absl::StatusOr<Summary> StopAndWrite();

  Progress progress() const;
  // Streaming only: the file reached the config's max_file_size_bytes; the
  // caller should stop the recording.
  bool file_limit_reached() const { return file_limit_reached_.load(); }
  // Data sources that could not start, with why (the rest keep recording).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // What went wrong (and right again) while recording, e.g. a full disk
  // under a streaming file, since the last call.
  std::vector<std::string> TakeNotices();

 private:
  Recording(config::TraceConfig config, std::unique_ptr<OutputFile> output)
      : config_(std::move(config)), output_(std::move(output)) {}
  bool streaming() const { return config_.write_into_file(); }
  struct Source {
    std::unique_ptr<ProducerBuffer> producer;
    std::string name;  // The config's data source name.
    std::unique_ptr<FtraceDataSource> ftrace;
    std::unique_ptr<BpfDataSource> bpf;
    uint32_t target_buffer = 0;
  };
  void OwnerLoop();
  void DrainAll();
  // The packets before any data: uuid, system_info, clocks, config, the
  // process tree at start, tracing_started.
  void AppendHeader(std::string* out);
  void AppendService(trace::TracePacket p, std::string* out);
  void AppendBufferPackets(std::string* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // write_into_file: appends whole packets to the open output file. On a
  // failed write it cuts the file back to its last whole packet, so the file
  // stays a valid trace.
  absl::Status WriteToStream(const std::string& bytes);
  // A periodic write. When writing fails (a full disk), the packets read are
  // kept and retried first the next time, and nothing more is read from the
  // buffers meanwhile: they keep the newest data, their overwrites counted.
  void StreamBuffers();
  void Notice(std::string message);
  trace::TracePacket ClockSnapshot() const;

  config::TraceConfig config_;
  std::unique_ptr<OutputFile> output_;
  // Unmounted at the end if this recording mounted it.
  std::optional<ftrace::Tracefs> tracefs_;
  // Descriptor tracking for the durable buffer beside buffers_[0] (null:
  // off). Declared before the sources, which report to it, so it outlives
  // them.
  std::unique_ptr<DescriptorTracker> tracker_;
  std::vector<Source> sources_;
  std::vector<std::string> warnings_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<buffer::TraceBuffer>> buffers_ ABSL_GUARDED_BY(mu_);

  // Trusted sequence ids given out so far, by {producer, writer}.
  std::map<uint32_t, uint32_t> sequence_ids_ ABSL_GUARDED_BY(mu_);
  uint64_t packets_ = 0;      // Written so far (header, data, trailer).
  uint64_t events_kept_ = 0;  // Kernel events in the packets written so far.
  // Read from the buffers, not yet written: the write failed. Owner thread
  // (StopAndWrite once the owner has stopped).
  std::string stream_pending_;
  std::atomic<uint64_t> file_bytes_{0};
  std::atomic<bool> file_limit_reached_{false};

  absl::Mutex notices_mu_;
  std::vector<std::string> notices_ ABSL_GUARDED_BY(notices_mu_);

  std::thread owner_;
  std::atomic<bool> stop_{false};
  int64_t start_boottime_ns_ = 0;
  trace::TracePacket start_clocks_;
  trace::TracePacket start_processes_;
};

// A ProcessTree packet of every process and thread in /proc.
trace::TracePacket ScanProcesses();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_RECORDING_H_
