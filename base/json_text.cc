#include "base/json_text.h"

#include "absl/strings/str_format.h"

namespace ringside::base {

std::string JsonText(const nlohmann::json& json) {
  const std::string text =
      json.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  // dump() escapes C0 controls but keeps DEL, the C1 controls and the
  // bidirectional controls as they are. The text is valid UTF-8 by now and
  // its structure ASCII, so these bytes are inside strings, where \uXXXX
  // says the same character.
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); i++) {
    const auto byte = [&text](size_t at) {
      return at < text.size() ? static_cast<unsigned char>(text[at]) : 0u;
    };
    const unsigned b = byte(i);
    if (b == 0x7f) {
      out += "\\u007f";
    } else if (b == 0xc2 && byte(i + 1) >= 0x80 && byte(i + 1) <= 0x9f) {
      absl::StrAppendFormat(&out, "\\u%04x", byte(i + 1));
      i++;
    } else if (b == 0xe2 && ((byte(i + 1) == 0x80 && byte(i + 2) >= 0xaa && byte(i + 2) <= 0xae) ||
                             (byte(i + 1) == 0x81 && byte(i + 2) >= 0xa6 && byte(i + 2) <= 0xa9))) {
      absl::StrAppendFormat(&out, "\\u%04x",
                            0x2000 | (byte(i + 1) & 0x3f) << 6 | (byte(i + 2) & 0x3f));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace ringside::base
