#ifndef RINGSIDE_AGENT_TRACEFILE_TRACE_SINK_H_
#define RINGSIDE_AGENT_TRACEFILE_TRACE_SINK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// Where a tracing session's packets go: a whole file written at the end, a
// file streamed while recording, later rotating and snapshot files. The
// session hands a sink framed TracePackets (buffer/trace_packet.h) and
// never knows what is behind it.
//
// Every sink keeps its output a valid trace: Write() adds whole packets or,
// when it fails (a full disk), nothing at all, so the caller may keep the
// bytes and retry them later. Not thread-safe.
class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // Appends `packets`, one or more whole framed packets.
  virtual absl::Status Write(absl::string_view packets) = 0;
  // The trace is complete: make it durable and visible under its final name.
  // Nothing may be written after.
  virtual absl::Status Finish() = 0;

  // What to call the output in messages ("out.pftrace", "standard output").
  virtual const std::string& display_name() const = 0;
  // Bytes of whole packets in the output so far.
  virtual uint64_t bytes_written() const = 0;
};

// A stream cut into files one after another (the agent's rotating drain,
// RotatingTraceFile). The session writes into the current file as into any
// sink; when FileDue() says so it ends that file with its trailer (clock
// snapshot, trace_stats), calls NextFile(), and begins the next one with a
// preamble and every descriptor, so each file opens alone. Finish() ends
// the last file.
class RotatingSink : public TraceSink {
 public:
  // The current file is big or old enough to end.
  virtual bool FileDue() const = 0;
  // Finishes the current file (if one is open) and opens the next. On
  // failure no file is open and Write() fails until a later call succeeds.
  virtual absl::Status NextFile() = 0;
};

// A sink into memory, for traces that go somewhere else than a file (and
// for tests).
class StringSink : public TraceSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    if (finished_) return absl::FailedPreconditionError("writing a finished trace");
    data_.append(packets.data(), packets.size());
    return absl::OkStatus();
  }
  absl::Status Finish() override {
    finished_ = true;
    return absl::OkStatus();
  }
  const std::string& display_name() const override { return name_; }
  uint64_t bytes_written() const override { return data_.size(); }

  const std::string& data() const { return data_; }
  bool finished() const { return finished_; }

 private:
  std::string name_ = "memory";
  std::string data_;
  bool finished_ = false;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_TRACE_SINK_H_
