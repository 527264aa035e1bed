#ifndef RINGSIDE_AGENT_TRACEFILE_TRACE_ARCHIVE_H_
#define RINGSIDE_AGENT_TRACEFILE_TRACE_ARCHIVE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/tracefile/trace_sink.h"

namespace ringside::agent {

// A TAR archive (POSIX ustar) of regular files, written into a sink, as
// Perfetto's importer takes several traces at once (`ringside merge`).
// Members are 0644, owned by root, with the names given (at most 100
// bytes, no directories). Not thread-safe.
class TarWriter {
 public:
  // `out` must outlive the writer.
  explicit TarWriter(TraceSink* out) : out_(out) {}

  // A member holding `contents`, modified at `mtime_s` (Unix seconds).
  absl::Status AddFile(const std::string& name, absl::string_view contents, int64_t mtime_s);
  // A member holding the file at `path`, read 1 MiB at a time; its size and
  // time are the file's. A file that changes size while read is an error.
  absl::Status AddFileFrom(const std::string& name, const std::string& path);
  // The end-of-archive blocks, and the sink finished.
  absl::Status Finish();

  // The largest member ustar's 11 octal digits of size can say (8 GiB - 1).
  static constexpr uint64_t kMaxMemberBytes = (uint64_t{1} << 33) - 1;

 private:
  absl::Status WriteHeader(const std::string& name, uint64_t size, int64_t mtime_s);
  absl::Status WritePadding(uint64_t size);

  TraceSink* out_;
};

// Whether `block` (a file's first 512 bytes) is a TAR header: ustar's or
// GNU's magic, and a checksum that adds up.
bool IsTarHeader(std::string_view block);

// A regular file in a TAR archive: its name (ustar's prefix joined on, or a
// GNU long name) and where its bytes are.
struct TarMember {
  std::string name;
  uint64_t offset = 0;  // Of its first byte in the archive.
  uint64_t size = 0;
};
// The regular files of the TAR archive open at `fd` (read with pread, so
// the file offset is left alone), in order; directories, links and pax
// headers are passed over. Untrusted: a header that does not add up, or a
// member past the end of the file, is an error naming its offset. `path`
// names the archive in errors.
absl::StatusOr<std::vector<TarMember>> ReadTarMembers(int fd, const std::string& path);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_TRACE_ARCHIVE_H_
