#ifndef RINGSIDE_AGENT_OUTPUT_COMPRESSING_SINK_H_
#define RINGSIDE_AGENT_OUTPUT_COMPRESSING_SINK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "agent/tracefile/packet_compression.h"
#include "agent/tracefile/trace_sink.h"

namespace ringside::agent {

// A sink that compresses the packets of each Write() into Perfetto's
// compressed packets (PacketCompressor) and hands them to another sink. It
// compresses on the thread that writes (record's main thread, the session's
// drain thread, a snapshot's writer), never holding packets back: what the
// inner sink has is a whole, readable trace after every Write(). Write()
// adds every packet or none, as the inner sink's does.
//
// Over a RotatingSink it is one too (FileDue, NextFile go to the inner
// sink): each Write() is compressed on its own, so every file opens alone,
// and the files' size limit counts the compressed bytes on disk.
class CompressingSink : public RotatingSink {
 public:
  // `inner` must outlive this sink.
  CompressingSink(TraceSink* inner, std::unique_ptr<PacketCompressor> compressor)
      : inner_(inner), compressor_(std::move(compressor)) {}
  CompressingSink(RotatingSink* inner, std::unique_ptr<PacketCompressor> compressor)
      : inner_(inner), rotating_(inner), compressor_(std::move(compressor)) {}

  absl::Status Write(absl::string_view packets) override;
  absl::Status Finish() override { return inner_->Finish(); }
  const std::string& display_name() const override { return inner_->display_name(); }
  // The compressed bytes, as the inner sink has them.
  uint64_t bytes_written() const override { return inner_->bytes_written(); }

  // Over a plain TraceSink: never due, and NextFile() fails.
  bool FileDue() const override { return rotating_ != nullptr && rotating_->FileDue(); }
  absl::Status NextFile() override;

  PacketCompression compression() const { return compressor_->compression(); }
  // Of the writes the inner sink took: the bytes of packets given, the
  // bytes written for them, and the CPU time compressing them took (a
  // failed write, retried, counts once). From any thread.
  uint64_t bytes_in() const { return bytes_in_.load(std::memory_order_relaxed); }
  uint64_t bytes_out() const { return bytes_out_.load(std::memory_order_relaxed); }
  uint64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }

 private:
  TraceSink* inner_;
  RotatingSink* rotating_ = nullptr;  // inner_, when it is one.
  std::unique_ptr<PacketCompressor> compressor_;
  std::string compressed_;
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<uint64_t> cpu_ns_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_COMPRESSING_SINK_H_
