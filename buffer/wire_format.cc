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

}  // namespace ringside::buffer
