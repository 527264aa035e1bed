#ifndef RINGSIDE_BUFFER_TRACE_PACKET_H_
#define RINGSIDE_BUFFER_TRACE_PACKET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringside::buffer {

// A trace file is a serialized Trace message: a run of this field
// (`repeated TracePacket packet = 1`), each one length-delimited.
inline constexpr uint32_t kTracePacketFieldNumber = 1;

// One TracePacket read out of a TraceBuffer, as the serialized bytes of a
// ringside.trace.TracePacket message (without the Trace.packet tag/length).
//
// An unfragmented packet is one slice pointing into the buffer's memory: no
// copy. A packet reassembled from fragments is copied into a buffer the packet
// owns. Slices into the buffer stay valid until the next write into that
// buffer (CopyChunkUntrusted), so consume the packet first.
class TracePacket {
 public:
  struct Slice {
    const uint8_t* data = nullptr;
    size_t size = 0;
  };

  TracePacket() = default;
  // Copying would leave slices pointing into the other packet's storage.
  TracePacket(const TracePacket&) = delete;
  TracePacket& operator=(const TracePacket&) = delete;

  const std::vector<Slice>& slices() const { return slices_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends the packet's bytes to *out.
  void AppendTo(std::string* out) const {
    for (const Slice& s : slices_) out->append(reinterpret_cast<const char*>(s.data), s.size);
  }
  std::string ToString() const {
    std::string s;
    s.reserve(size_);
    AppendTo(&s);
    return s;
  }

  // Appends the Trace.packet framing (tag + varint length) and the packet's
  // bytes to *out: what a trace file holds for this packet.
  void AppendFramedTo(std::string* out) const;

  // Used by TraceBuffer.
  void Clear() {
    slices_.clear();
    owned_.clear();
    size_ = 0;
  }
  void AddSlice(const uint8_t* data, size_t size) {
    slices_.push_back(Slice{data, size});
    size_ += size;
  }
  // Copies the given pieces into storage the packet owns, as one slice.
  void AssignOwned(const std::vector<Slice>& pieces);

 private:
  std::vector<Slice> slices_;
  std::string owned_;
  size_t size_ = 0;
};

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_TRACE_PACKET_H_
