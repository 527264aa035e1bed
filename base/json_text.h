#ifndef RINGSIDE_BASE_JSON_TEXT_H_
#define RINGSIDE_BASE_JSON_TEXT_H_

#include <string>

#include "nlohmann/json.hpp"

namespace ringside::base {

// `json` as indented text, for the --json output of `inspect` and `status`.
// The strings in it are bytes a trace or an agent carried (comms cut
// mid-character, paths), not always UTF-8, and nlohmann's dump() throws on
// those by default: here every byte that is not part of valid UTF-8 becomes
// U+FFFD instead, so rendering never fails. Valid UTF-8 is kept as is, not
// escaped, but for the characters a terminal acts on (control characters,
// DEL, C1 controls, bidirectional overrides), written as \uXXXX so that the
// JSON shown on a terminal cannot drive it.
std::string JsonText(const nlohmann::json& json);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_JSON_TEXT_H_
