#ifndef RINGSIDE_AGENT_SESSION_SESSION_STREAM_H_
#define RINGSIDE_AGENT_SESSION_SESSION_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/session/service_packets.h"
#include "agent/session/session_buffers.h"
#include "agent/tracefile/trace_sink.h"
#include "base/owner_thread.h"

namespace ringside::agent {

// A session's streaming side (write_into_file): the periodic write of the
// buffers into the stream sink and, for a stream cut into files
// (RotatingSink), where one file ends and the next begins. Each file of a
// rotating stream stands alone: it begins with the session's preamble and
// every descriptor of the durable store, and ends with a clock snapshot and
// trace_stats.
//
// A write that fails (a full disk) loses nothing read from the buffers: it
// is kept (pending_) and written first the next time, and nothing more is
// read from the buffers meanwhile, which keep the newest data, their
// overwrites counted. A next file that cannot be opened is tried again at
// each write. Each failure, and the recovery, is told once (Hooks::notice).
//
// Threading: the stream's state (pending_, the flags, the sink's write
// side) belongs to one thread at a time (OwnerThread): the one that starts
// the session, then the drain thread, then the one that stopped it
// (docs/design/threading.md). file_limit_reached() is read from any.
class SessionStream {
 public:
  // What the stream needs of its session.
  struct Hooks {
    // Appends the preamble of a new file of the stream (with a /proc scan
    // of now when there is no durable store).
    std::function<void(std::string* out)> preamble;
    // Each source's stats as of now, for the trace_stats that ends a file.
    std::function<std::vector<SourceStats>()> source_stats;
    // Tells what went wrong, or right again (TracingSession::TakeNotices).
    std::function<void(std::string message)> notice;
    // file_limit_reached() turned true (optional).
    std::function<void()> limit_reached;
  };

  // Streams `buffers` into `sink`, whose bytes are framed packets of
  // machine `machine_id`. `rotating` is `sink` when it is cut into files,
  // else null. `max_file_size_bytes` (0: none) is, for a rotating sink, the
  // size at which a file ends; for another, the size at which
  // file_limit_reached() turns true. The sinks and `buffers` outlive the
  // stream.
  SessionStream(SessionBuffers* buffers, TraceSink* sink, RotatingSink* rotating,
                uint64_t max_file_size_bytes, uint32_t machine_id, Hooks hooks);

  // The calling thread owns the stream's state from now on (the drain
  // thread as it starts, the thread that joined it after the join).
  void ClaimState() { state_.Claim(); }
  // Aborts unless the calling thread owns the stream's state.
  void CheckState() { state_.Check(); }

  // Writes `bytes` (whole framed packets) into the sink as they are.
  absl::Status Write(const std::string& bytes);
  // The periodic write: what could not be written before, then what the
  // buffers hold that was not read, in batches of kDrainBatchBytes. A file
  // whose max age has passed (RotatingSink::FileDue) is then finished and
  // the next begun, unless `end_of_recording`: the trailer still has to go
  // into it, and a file begun for the trailer alone would hold no event.
  void WriteIntoFile(bool end_of_recording = false);
  // Before the recording's trailer goes into the stream: a file to write it
  // into, if the last one was ended; for files cut by size, the rest of the
  // buffers, into as many files as it needs. Fails with kUnavailable when
  // no file can be opened.
  absl::Status DrainForTrailer();
  // Writes what a failed write left (nothing, mostly).
  absl::Status WritePending();

  TraceSink* sink() const { return sink_; }
  bool rotating() const { return rotating_ != nullptr; }
  // Not rotating: the file reached max_file_size_bytes; the session should
  // stop.
  bool file_limit_reached() const { return file_limit_reached_.load(); }
  // The packets the stream wrote itself: each ended file's clock snapshot
  // and trace_stats.
  uint64_t service_packets() const { return service_packets_; }

  // How much a write reads from the buffers per hold of their lock.
  static constexpr size_t kDrainBatchBytes = 1 << 20;

 private:
  // Writes whole packets; a rotating stream's file is ended at
  // max_file_size_bytes, between two packets, and the rest goes into the
  // next. False when a write failed (told once): the rest is then in
  // pending_, as it is when no next file could be opened (needs_file_).
  bool StreamOut(std::string data);
  // Rotation only: the trailer of the current file; then the next file and
  // its preamble (queued in pending_), false while no file can be opened.
  void EndFile();
  bool BeginFile();

  SessionBuffers* const buffers_;
  TraceSink* const sink_;
  RotatingSink* const rotating_;  // sink_, when it is cut into files.
  const uint64_t max_file_size_bytes_;
  const uint32_t machine_id_;
  const Hooks hooks_;

  base::OwnerThread state_{"the session's stream state"};
  // The current file was ended and no next one is open yet; opening it
  // failed (told once, until it works again).
  bool needs_file_ = false;
  bool file_failed_ = false;
  // A write failed; pending_ holds what it could not write.
  bool write_failed_ = false;
  // Read from the buffers (or a next file's preamble), not yet written.
  std::string pending_;
  uint64_t service_packets_ = 0;
  std::atomic<bool> file_limit_reached_{false};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_SESSION_STREAM_H_
