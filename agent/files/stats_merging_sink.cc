#include "agent/files/stats_merging_sink.h"

#include <utility>

#include "agent/writer/wire_format.h"
#include "buffer/wire_format.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

// Trace.packet: field 1, length-delimited.
constexpr uint8_t kPacketTag = (1 << 3) | 2;

// Where the last framed packet of `bytes` starts, or npos when `bytes` are
// not whole framed packets.
size_t LastPacketOffset(absl::string_view bytes) {
  const uint8_t* const begin = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* const end = begin + bytes.size();
  const uint8_t* p = begin;
  size_t last = absl::string_view::npos;
  while (p < end) {
    last = static_cast<size_t>(p - begin);
    if (*p++ != kPacketTag) return absl::string_view::npos;
    uint64_t size = 0;
    if (!buffer::ReadVarInt(&p, end, &size) || size > static_cast<uint64_t>(end - p)) {
      return absl::string_view::npos;
    }
    p += size;
  }
  return last;
}

}  // namespace

StatsMergingSink::StatsMergingSink(TraceSink* inner, trace::TraceStats extra)
    : inner_(inner), extra_(std::move(extra)) {}

absl::Status StatsMergingSink::Write(absl::string_view packets) {
  if (!held_.empty()) {
    if (absl::Status st = inner_->Write(held_); !st.ok()) return st;
    held_.clear();
  }
  const size_t last = LastPacketOffset(packets);
  if (last == absl::string_view::npos) return inner_->Write(packets);
  if (last > 0) {
    if (absl::Status st = inner_->Write(packets.substr(0, last)); !st.ok()) return st;
  }
  held_ = std::string(packets.substr(last));
  return absl::OkStatus();
}

absl::Status StatsMergingSink::Finish() {
  if (!held_.empty()) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(held_.data()) + 1;  // Past the tag.
    const uint8_t* const end = reinterpret_cast<const uint8_t*>(held_.data()) + held_.size();
    uint64_t size = 0;
    trace::TracePacket packet;
    if (buffer::ReadVarInt(&p, end, &size) && packet.ParseFromArray(p, static_cast<int>(end - p)) &&
        packet.has_trace_stats()) {
      packet.mutable_trace_stats()->MergeFrom(extra_);
      held_.clear();
      AppendFramedPacket(packet.SerializeAsString(), &held_);
      merged_ = true;
    }
    if (absl::Status st = inner_->Write(held_); !st.ok()) return st;
    held_.clear();
  }
  return inner_->Finish();
}

}  // namespace ringside::agent
