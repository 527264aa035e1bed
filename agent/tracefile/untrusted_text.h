#ifndef RINGSIDE_AGENT_TRACEFILE_UNTRUSTED_TEXT_H_
#define RINGSIDE_AGENT_TRACEFILE_UNTRUSTED_TEXT_H_

#include <string>
#include <string_view>

namespace ringside::agent {

// Text a file carried (a machine name, a comm, a trigger's name), made safe
// to print on a terminal: control characters would otherwise move the
// cursor, retitle the window or rewrite what was printed before, the way a
// planted machine_name could make `inspect` show whatever its author liked.
//
// Valid UTF-8 that prints is kept as it is (names in any script). Escaped as
// `\xNN`, byte by byte: C0 controls (escape, newline, ...), DEL, C1 controls
// (U+0080..U+009F, which some terminals take as CSI), and bytes 0x80..0x9f
// that are not part of valid UTF-8 (a lone 0x9b is CSI to an 8-bit
// terminal); other bytes that are not UTF-8 (Latin-1's letters) are kept,
// as they drive no terminal. Escaped as `\u{N}`:
// the bidirectional overrides and isolates (U+202A..U+202E,
// U+2066..U+2069), which reorder what follows them on the line.
std::string PrintableText(std::string_view untrusted);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_UNTRUSTED_TEXT_H_
