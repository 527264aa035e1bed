#ifndef RINGSIDE_TESTS_AGENT_TESTING_DIR_ENTRIES_H_
#define RINGSIDE_TESTS_AGENT_TESTING_DIR_ENTRIES_H_

#include <set>
#include <string>

namespace ringside::agent::testing {

// The names in `dir` but "." and ".."; empty if it cannot be read.
std::set<std::string> ListDir(const std::string& dir);

// ListDir without the sidecars the agent writes after its files
// (<file>.json, and .<file>.json.tmp while one is written).
std::set<std::string> ListTraces(const std::string& dir);

// Writes `text` to `path` (created or truncated); false if it could not.
bool WriteTextFile(const std::string& path, const std::string& text);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_DIR_ENTRIES_H_
