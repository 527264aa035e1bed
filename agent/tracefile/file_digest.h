#ifndef RINGSIDE_AGENT_TRACEFILE_FILE_DIGEST_H_
#define RINGSIDE_AGENT_TRACEFILE_FILE_DIGEST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringside::agent {

// The SHA-256 of a file's bytes as shippers and `sha256sum` print it (64
// lowercase hex digits), and how many bytes it covers.
struct FileDigest {
  uint64_t size = 0;
  std::string sha256;
};

// Of the open file `fd`, read from offset 0 to its end with pread (the
// descriptor's offset is left alone, so a reader of the same descriptor is
// not disturbed). `name` names the file in errors.
absl::StatusOr<FileDigest> DigestFile(int fd, const std::string& name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_FILE_DIGEST_H_
