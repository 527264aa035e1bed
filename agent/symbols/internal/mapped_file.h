#ifndef RINGSIDE_AGENT_SYMBOLS_INTERNAL_MAPPED_FILE_H_
#define RINGSIDE_AGENT_SYMBOLS_INTERNAL_MAPPED_FILE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "agent/symbols/process_maps.h"
#include "base/scoped_fd.h"

namespace ringside::agent::internal {

// A file a process has mapped, found (an O_PATH descriptor, which reads
// nothing), with what fstat() said of it: enough to know it already read.
struct MappedFile {
  base::ScopedFd path_fd;
  struct stat st = {};
  std::string what;  // How it was found, for errors.

  // Opens it for reading, through its O_PATH descriptor: the same file,
  // with no path looked up again.
  absl::StatusOr<base::ScopedFd> OpenForReading() const;
};

// Opens the file of `mapping` (a kFile entry of `pid`'s maps) to read its
// ELF headers and symbols: the path comes from a process ringside does not
// trust, and ringside runs as root, so the file is looked up where the
// process sees it and never through a link it could plant:
//   1. `proc_root`/PID/map_files/START-END: the very file mapped, deleted or
//      replaced since, in whatever mount namespace; needs CAP_SYS_ADMIN (or
//      CAP_CHECKPOINT_RESTORE) in the initial user namespace.
//   2. otherwise (and never for a deleted file) the path under
//      `proc_root`/PID/root, the process's own root (a container's files in
//      its mount namespace), resolved by openat2() with RESOLVE_IN_ROOT |
//      RESOLVE_NO_MAGICLINKS: an absolute symlink inside the container
//      stays inside it, and /proc/self/... tricks fail. Its inode must be
//      the one the maps line gives (a file replaced since is not read).
//      Needs PTRACE_MODE_READ on the process and openat2 (Linux 5.6).
// Either way the file is opened O_PATH, so that nothing but a regular file
// of at most `max_bytes` is ever opened for reading (a FIFO would block, a
// device could act on open): OpenForReading() does that, when the caller
// has not read the file already.
// Fails naming the pid and path: kNotFound (gone), kPermissionDenied,
// kFailedPrecondition (not a regular file, or not the mapped inode),
// kResourceExhausted (over max_bytes).
absl::StatusOr<MappedFile> OpenMappedFile(const std::string& proc_root, pid_t pid,
                                          const MapsEntry& mapping, uint64_t max_bytes);

}  // namespace ringside::agent::internal

#endif  // RINGSIDE_AGENT_SYMBOLS_INTERNAL_MAPPED_FILE_H_
