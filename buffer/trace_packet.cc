#include "buffer/trace_packet.h"

#include "buffer/wire_format.h"

namespace ringside::buffer {

namespace {

constexpr uint8_t kPacketTag = MakeTag(kTracePacketFieldNumber, WireType::kLengthDelimited);
static_assert(kPacketTag == 0x0a, "a one-byte tag, as every trace file has it");

}  // namespace

void AppendFramedPacket(std::string_view packet, std::string* out) {
  AppendLengthDelimitedField(kTracePacketFieldNumber, packet, out);
}

PacketFrame ReadPacketFrame(const uint8_t* p, const uint8_t* end) {
  PacketFrame frame;
  if (p >= end) return frame;  // kCut: nothing of it yet.
  if (*p != kPacketTag) {
    frame.status = PacketFrame::Status::kNotAPacket;
    return frame;
  }
  uint64_t size = 0;
  const size_t length_size = ParseVarInt(p + 1, end, &size);
  if (length_size == 0) {
    // Cut short by `end`, or longer than any varint.
    const bool cut = end - (p + 1) < static_cast<ptrdiff_t>(kMaxVarIntSize);
    frame.status = cut ? PacketFrame::Status::kCut : PacketFrame::Status::kNotAPacket;
    return frame;
  }
  frame.header_size = 1 + length_size;
  frame.packet_size = size;
  const uint64_t available = static_cast<uint64_t>(end - p) - frame.header_size;
  frame.status = size <= available ? PacketFrame::Status::kWhole : PacketFrame::Status::kCut;
  return frame;
}

void TracePacket::AppendFramedTo(std::string* out) const {
  AppendTag(kTracePacketFieldNumber, WireType::kLengthDelimited, out);
  AppendVarInt(size_, out);
  AppendTo(out);
}

void TracePacket::AssignOwned(const std::vector<Slice>& pieces) {
  size_t total = 0;
  for (const Slice& s : pieces) total += s.size;
  slices_.clear();
  owned_.clear();
  owned_.reserve(total);
  for (const Slice& s : pieces) owned_.append(reinterpret_cast<const char*>(s.data), s.size);
  size_ = owned_.size();
  slices_.push_back(Slice{reinterpret_cast<const uint8_t*>(owned_.data()), owned_.size()});
}

}  // namespace ringside::buffer
