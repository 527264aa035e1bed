#ifndef RINGSIDE_BASE_SMALL_FILE_H_
#define RINGSIDE_BASE_SMALL_FILE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ringside::base {

// The whole of a small file (a /proc or /sys file, /etc/machine-id), or
// nullopt when it cannot be opened. Not for files that may be large.
std::optional<std::string> ReadSmallFile(const std::string& path);
// The same, "" when it cannot be opened (where an empty file means the
// same to the caller).
std::string ReadSmallFileOrEmpty(const std::string& path);

// The whole of `path`, read to its end whatever size it reports (/proc files
// report 0), for files whose size only the reader bounds: /proc/kallsyms
// (megabytes), another process's /proc/PID/maps. Fails with the errno of
// open() or read() (base::ErrnoToStatus, naming the path), or with
// kResourceExhausted when the file holds more than `max_bytes`.
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_SMALL_FILE_H_
