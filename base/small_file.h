#ifndef RINGSIDE_BASE_SMALL_FILE_H_
#define RINGSIDE_BASE_SMALL_FILE_H_

#include <optional>
#include <string>

namespace ringside::base {

// The whole of a small file (a /proc or /sys file, /etc/machine-id), or
// nullopt when it cannot be opened. Not for files that may be large.
std::optional<std::string> ReadSmallFile(const std::string& path);
// The same, "" when it cannot be opened (where an empty file means the
// same to the caller).
std::string ReadSmallFileOrEmpty(const std::string& path);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_SMALL_FILE_H_
