#include "buffer/trace_packet.h"

#include "buffer/wire_format.h"

namespace ringside::buffer {

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
