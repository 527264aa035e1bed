#ifndef RINGSIDE_BUFFER_WIRE_FORMAT_H_
#define RINGSIDE_BUFFER_WIRE_FORMAT_H_

// Protobuf wire-format primitives: the one place in ringside that knows how
// tags, varints, fixed-width and length-delimited fields are laid out. The
// chunk ABI, the TraceWriter, the file writers and readers all build on these.
//
//   tag     = varint(field_number << 3 | wire_type)
//   varint  = 7 bits per byte, least significant group first, bit 7 set on
//             every byte but the last; at most 10 bytes for 64 bits
//   fixed   = 4 or 8 bytes, little-endian
//   length-delimited = varint(size) followed by size bytes
//
// A "redundant" varint is padded with continuation bits to a fixed 4 bytes,
// so a writer can reserve a length before it knows it and fill it in place:
//
//   value 5:  0x85 0x80 0x80 0x00     value 2^28-1:  0xff 0xff 0xff 0x7f
//
// Writers take a pointer with room for the bytes (kMaxVarIntSize for a
// varint) and return the pointer past what they wrote; they are inline because
// the TraceWriter runs them per field. Readers take untrusted bytes and never
// read at or past `end`.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ringside::buffer {

enum class WireType : uint8_t {
  kVarInt = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5,
};

inline constexpr size_t kMaxVarIntSize = 10;
// Field numbers are below 2^29, so a tag takes at most 5 bytes.
inline constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;
inline constexpr size_t kMaxTagSize = 5;
inline constexpr size_t kRedundantVarIntSize = 4;
// The largest value a 4-byte varint holds.
inline constexpr uint32_t kMaxRedundantVarIntValue = (1u << 28) - 1;

constexpr uint64_t MakeTag(uint32_t field_number, WireType type) {
  return uint64_t{field_number} << 3 | static_cast<uint8_t>(type);
}
constexpr uint64_t TagFieldNumber(uint64_t tag) { return tag >> 3; }
constexpr uint8_t TagWireType(uint64_t tag) { return static_cast<uint8_t>(tag & 7); }

// Bytes WriteVarInt() takes for `value`: 1 to 10.
constexpr size_t VarIntSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    size++;
  }
  return size;
}

// --- Writing into memory. REQUIRES: room at `dst` for what is written. ------

inline uint8_t* WriteVarInt(uint64_t value, uint8_t* dst) {
  while (value >= 0x80) {
    *dst++ = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  *dst++ = static_cast<uint8_t>(value);
  return dst;
}

inline uint8_t* WriteTag(uint32_t field_number, WireType type, uint8_t* dst) {
  return WriteVarInt(MakeTag(field_number, type), dst);
}

inline uint8_t* WriteFixed32(uint32_t value, uint8_t* dst) {
  for (int i = 0; i < 4; i++) *dst++ = static_cast<uint8_t>(value >> (8 * i));
  return dst;
}

inline uint8_t* WriteFixed64(uint64_t value, uint8_t* dst) {
  for (int i = 0; i < 8; i++) *dst++ = static_cast<uint8_t>(value >> (8 * i));
  return dst;
}

// Writes `value` as a 4-byte redundant varint at `dst`.
// REQUIRES: value <= kMaxRedundantVarIntValue (higher bits are lost).
inline void WriteRedundantVarInt(uint32_t value, uint8_t* dst) {
  dst[0] = static_cast<uint8_t>(value) | 0x80;
  dst[1] = static_cast<uint8_t>(value >> 7) | 0x80;
  dst[2] = static_cast<uint8_t>(value >> 14) | 0x80;
  dst[3] = static_cast<uint8_t>(value >> 21) & 0x7f;
}

// --- Appending to a string, for messages assembled off the hot path. --------

void AppendVarInt(uint64_t value, std::string* out);
void AppendTag(uint32_t field_number, WireType type, std::string* out);
void AppendVarIntField(uint32_t field_number, uint64_t value, std::string* out);
// Appends the tag, the varint length and `bytes`.
void AppendLengthDelimitedField(uint32_t field_number, std::string_view bytes, std::string* out);

// --- Reading untrusted bytes. ----------------------------------------------

// Decodes a varint of at most `max_size` bytes from [p, end). Returns the
// number of bytes it took, or 0 if `end` cuts it short or it would need more
// than `max_size` bytes. As libprotobuf does, bits beyond 64 in a 10th byte are
// ignored.
inline size_t ParseVarInt(const uint8_t* p, const uint8_t* end, uint64_t* value,
                          size_t max_size = kMaxVarIntSize) {
  uint64_t result = 0;
  for (size_t i = 0; i < max_size && i < kMaxVarIntSize; i++) {
    if (p + i >= end) return 0;
    result |= uint64_t{p[i] & 0x7fu} << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *value = result;
      return i + 1;
    }
  }
  return 0;
}

// Reads a varint at *p and advances *p past it. Returns false, leaving *p
// where it was, if the varint is truncated by `end` or longer than 10 bytes.
inline bool ReadVarInt(const uint8_t** p, const uint8_t* end, uint64_t* value) {
  const size_t size = ParseVarInt(*p, end, value);
  *p += size;
  return size != 0;
}

// Reads a 4-byte redundant varint, the form WriteRedundantVarInt() writes.
// Returns false if [p, end) holds fewer than 4 bytes or they are not in that
// form (continuation bits on the first three bytes only).
// Inline and branch-light: the buffer runs it for every fragment it commits
// or reads, each depending on the one before.
inline bool ReadRedundantVarInt(const uint8_t* p, const uint8_t* end, uint32_t* value) {
  if (end - p < static_cast<ptrdiff_t>(kRedundantVarIntSize)) return false;
  // The four bytes as one little-endian word, byte i in bits 8i..8i+7.
  uint32_t word;
  std::memcpy(&word, p, sizeof(word));
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap32(word);
  if ((word & 0x80808080u) != 0x00808080u) return false;
  *value = (word & 0x7fu) | (word >> 1 & 0x7fu << 7) | (word >> 2 & 0x7fu << 14) |
           (word >> 3 & 0x7fu << 21);
  return true;
}

// The values in a packed repeated varint field's payload: its bytes without
// the continuation bit. A truncated last varint is not counted.
inline size_t CountPackedVarInts(std::string_view packed) {
  size_t n = 0;
  for (char c : packed) n += (static_cast<uint8_t>(c) & 0x80) == 0;
  return n;
}

// Decodes a varint fed one byte at a time, for readers that pull bytes from a
// stream and must not read past the varint's end.
class VarIntDecoder {
 public:
  enum class State {
    kNeedMore,  // Feed the next byte.
    kDone,      // value() holds the varint; size() bytes were fed.
    kOverlong,  // An 11th byte would be needed: not a valid varint.
  };

  // REQUIRES: the last call did not return kDone or kOverlong (else Reset()).
  State Feed(uint8_t byte) {
    value_ |= uint64_t{byte & 0x7fu} << (7 * size_);
    size_++;
    if ((byte & 0x80) == 0) return State::kDone;
    return size_ < kMaxVarIntSize ? State::kNeedMore : State::kOverlong;
  }
  void Reset() { *this = VarIntDecoder(); }

  uint64_t value() const { return value_; }
  size_t size() const { return size_; }

 private:
  uint64_t value_ = 0;
  size_t size_ = 0;
};

// One field of a message, as ReadField() finds it.
struct Field {
  uint32_t number = 0;
  WireType type = WireType::kVarInt;
  // kVarInt, kFixed32, kFixed64: the value; kLengthDelimited: the size.
  uint64_t int_value = 0;
  // kLengthDelimited: the payload, pointing into the message; empty otherwise.
  std::string_view bytes;
};

// Reads the field at *p (tag and value) and advances *p past it. Returns
// false, leaving *p where it was, on a truncated field, a length running past
// `end`, field number 0 or above kMaxFieldNumber, or a wire type other than
// the four above (groups are not supported). Inline: readers call it per
// field of every packet.
inline bool ReadField(const uint8_t** p, const uint8_t* end, Field* field) {
  const uint8_t* cur = *p;
  uint64_t tag = 0;
  if (!ReadVarInt(&cur, end, &tag)) return false;
  const uint64_t number = TagFieldNumber(tag);
  if (number == 0 || number > kMaxFieldNumber) return false;
  Field f;
  f.number = static_cast<uint32_t>(number);
  switch (TagWireType(tag)) {
    case static_cast<uint8_t>(WireType::kVarInt):
      f.type = WireType::kVarInt;
      if (!ReadVarInt(&cur, end, &f.int_value)) return false;
      break;
    case static_cast<uint8_t>(WireType::kFixed64):
    case static_cast<uint8_t>(WireType::kFixed32): {
      f.type = static_cast<WireType>(TagWireType(tag));
      const size_t size = f.type == WireType::kFixed64 ? 8 : 4;
      if (static_cast<size_t>(end - cur) < size) return false;
      for (size_t i = 0; i < size; i++) f.int_value |= uint64_t{cur[i]} << (8 * i);
      cur += size;
      break;
    }
    case static_cast<uint8_t>(WireType::kLengthDelimited):
      f.type = WireType::kLengthDelimited;
      if (!ReadVarInt(&cur, end, &f.int_value) || f.int_value > static_cast<uint64_t>(end - cur)) {
        return false;
      }
      f.bytes =
          std::string_view(reinterpret_cast<const char*>(cur), static_cast<size_t>(f.int_value));
      cur += f.int_value;
      break;
    default:
      return false;
  }
  *field = f;
  *p = cur;
  return true;
}

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_WIRE_FORMAT_H_
