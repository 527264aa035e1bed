#include "agent/tracefile/untrusted_text.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace ringside::agent {
namespace {

// The length of the valid UTF-8 sequence at `s[i]` and its code point, or 0
// when the bytes there are not one (overlong forms and surrogates included).
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* code_point) {
  const auto byte = [&s](size_t at) { return static_cast<uint8_t>(s[at]); };
  const uint8_t lead = byte(i);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    n = 2, cp = lead & 0x1f, min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    n = 3, cp = lead & 0x0f, min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return n;
}

bool IsBidiControl(uint32_t cp) {
  return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string PrintableText(std::string_view untrusted) {
  std::string out;
  out.reserve(untrusted.size());
  for (size_t i = 0; i < untrusted.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(untrusted, i, &cp);
    const auto byte = static_cast<uint8_t>(untrusted[i]);
    if (n == 0 && byte >= 0xa0) {
      // Not UTF-8, but no control either (Latin-1's letters): as it is.
      out.push_back(untrusted[i]);
      i++;
    } else if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
      // A control character or a byte that is no character: each byte.
      for (size_t k = 0; k < (n == 0 ? 1 : n); k++) {
        absl::StrAppendFormat(&out, "\\x%02x", static_cast<uint8_t>(untrusted[i + k]));
      }
      i += n == 0 ? 1 : n;
    } else if (IsBidiControl(cp)) {
      absl::StrAppendFormat(&out, "\\u{%04x}", cp);
      i += n;
    } else {
      out.append(untrusted.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace ringside::agent
