#include "agent/writer/wire_format.h"

namespace ringside::agent {
namespace {

// Field numbers (trace_packet.proto, ftrace_event_bundle.proto).
constexpr uint32_t kPacketFtraceEvents = 1;
constexpr uint32_t kBundleEvent = 2;
constexpr uint32_t kBundleCompactSched = 4;
constexpr uint32_t kCompactSwitchTimestamp = 1;
constexpr uint32_t kCompactWakingTimestamp = 7;

constexpr int kVarInt = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void AppendVarInt(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool ReadVarInt(const char** p, const char* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*(*p)++);
    *v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls `field(number, wire_type, payload)` for each field of a message;
// stops at the first malformed byte. Payload is the bytes of a
// length-delimited field, empty otherwise.
template <typename F>
void ForEachField(absl::string_view msg, F field) {
  const char* p = msg.data();
  const char* end = p + msg.size();
  while (p < end) {
    uint64_t tag, v;
    if (!ReadVarInt(&p, end, &tag)) return;
    const int type = static_cast<int>(tag & 7);
    const uint32_t number = static_cast<uint32_t>(tag >> 3);
    absl::string_view payload;
    switch (type) {
      case kVarInt:
        if (!ReadVarInt(&p, end, &v)) return;
        break;
      case kFixed64:
      case kFixed32: {
        const size_t n = type == kFixed64 ? 8 : 4;
        if (static_cast<size_t>(end - p) < n) return;
        p += n;
        break;
      }
      case kLengthDelimited:
        if (!ReadVarInt(&p, end, &v) || v > static_cast<uint64_t>(end - p)) return;
        payload = absl::string_view(p, static_cast<size_t>(v));
        p += v;
        break;
      default:
        return;
    }
    field(number, type, payload);
  }
}

// Values in a packed varint field: bytes without the continuation bit.
uint64_t PackedCount(absl::string_view packed) {
  uint64_t n = 0;
  for (char c : packed) n += (static_cast<uint8_t>(c) & 0x80) == 0;
  return n;
}

}  // namespace

void AppendFramedPacket(absl::string_view packet, std::string* out) {
  out->push_back('\x0a');
  AppendVarInt(packet.size(), out);
  out->append(packet.data(), packet.size());
}

void AppendVarIntField(uint32_t field, uint64_t value, std::string* out) {
  AppendVarInt(uint64_t{field} << 3, out);
  AppendVarInt(value, out);
}

uint64_t CountEventsInPacket(absl::string_view packet) {
  uint64_t events = 0;
  ForEachField(packet, [&](uint32_t number, int type, absl::string_view bundle) {
    if (number != kPacketFtraceEvents || type != kLengthDelimited) return;
    ForEachField(bundle, [&](uint32_t n, int t, absl::string_view payload) {
      if (t != kLengthDelimited) return;
      if (n == kBundleEvent) {
        events++;
      } else if (n == kBundleCompactSched) {
        ForEachField(payload, [&](uint32_t c, int ct, absl::string_view column) {
          if (ct == kLengthDelimited &&
              (c == kCompactSwitchTimestamp || c == kCompactWakingTimestamp)) {
            events += PackedCount(column);
          }
        });
      }
    });
  });
  return events;
}

}  // namespace ringside::agent
