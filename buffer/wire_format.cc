#include "buffer/wire_format.h"

namespace ringside::buffer {

void AppendVarInt(uint64_t value, std::string* out) {
  uint8_t buf[kMaxVarIntSize];
  const uint8_t* end = WriteVarInt(value, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

void AppendTag(uint32_t field_number, WireType type, std::string* out) {
  AppendVarInt(MakeTag(field_number, type), out);
}

void AppendVarIntField(uint32_t field_number, uint64_t value, std::string* out) {
  AppendTag(field_number, WireType::kVarInt, out);
  AppendVarInt(value, out);
}

void AppendLengthDelimitedField(uint32_t field_number, std::string_view bytes, std::string* out) {
  AppendTag(field_number, WireType::kLengthDelimited, out);
  AppendVarInt(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

bool ReadField(const uint8_t** p, const uint8_t* end, Field* field) {
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
