#ifndef RINGSIDE_BUFFER_TRACE_PACKET_H_
#define RINGSIDE_BUFFER_TRACE_PACKET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringside::buffer {

// A trace file is a serialized Trace message: a run of this field
// (`repeated TracePacket packet = 1`), each one length-delimited.
inline constexpr uint32_t kTracePacketFieldNumber = 1;

// --- Framing: a packet as a trace file holds it. ----------------------------
//
//   frame = tag 0x0a (field 1, length-delimited), varint length, packet
//
// Every writer of framed packets goes through AppendFramedPacket() (or
// TracePacket::AppendFramedTo), and every reader of framed bytes in memory
// through ReadPacketFrame(). (TraceFileReader reads a stream byte by byte with
// VarIntDecoder instead, to name the offset of what is wrong.)

// Appends the framing and `packet` to *out.
void AppendFramedPacket(std::string_view packet, std::string* out);

// The frame at the start of some bytes.
struct PacketFrame {
  enum class Status {
    kWhole,       // Header and packet are all there.
    kCut,         // The bytes end inside the header or the packet.
    kNotAPacket,  // Not Trace.packet's tag, or a length varint over 10 bytes.
  };
  Status status = Status::kCut;
  size_t header_size = 0;    // Tag and length; 0 unless the header is whole.
  uint64_t packet_size = 0;  // The packet's bytes after the header.
  // The whole frame's bytes. REQUIRES: header_size != 0.
  uint64_t size() const { return header_size + packet_size; }
};

// Reads the frame at the start of [p, end), untrusted bytes: never reads at
// or past `end`. A frame whose header is whole but whose packet is cut has
// status kCut and its header_size and packet_size set, so a reader of the
// headers alone (a file read piece by piece) learns where the frame ends.
PacketFrame ReadPacketFrame(const uint8_t* p, const uint8_t* end);

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
