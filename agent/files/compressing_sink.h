#ifndef RINGSIDE_AGENT_FILES_COMPRESSING_SINK_H_
#define RINGSIDE_AGENT_FILES_COMPRESSING_SINK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "agent/files/packet_compression.h"
#include "agent/files/trace_sink.h"

namespace ringside::agent {

// A sink that compresses the packets of each Write() into Perfetto's
// compressed packets (PacketCompressor) and hands them to another sink. It
// compresses on the thread that writes (the session's drain, a snapshot's
// writer), never holding packets back: what the inner sink has is a whole,
// readable trace after every Write(). Write() adds every packet or none, as
// the inner sink's does.
class CompressingSink : public TraceSink {
 public:
  // `inner` must outlive this sink.
  CompressingSink(TraceSink* inner, std::unique_ptr<PacketCompressor> compressor)
      : inner_(inner), compressor_(std::move(compressor)) {}

  absl::Status Write(absl::string_view packets) override;
  absl::Status Finish() override { return inner_->Finish(); }
  const std::string& display_name() const override { return inner_->display_name(); }
  // The compressed bytes, as the inner sink has them.
  uint64_t bytes_written() const override { return inner_->bytes_written(); }

  PacketCompression compression() const { return compressor_->compression(); }
  // Of the writes the inner sink took: the bytes of packets given, the
  // bytes written for them, and the CPU time compressing them took (a
  // failed write, retried, counts once).
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }
  uint64_t cpu_ns() const { return cpu_ns_; }

 private:
  TraceSink* inner_;
  std::unique_ptr<PacketCompressor> compressor_;
  std::string compressed_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t cpu_ns_ = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_FILES_COMPRESSING_SINK_H_
