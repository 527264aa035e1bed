#ifndef RINGSIDE_AGENT_SYMBOLS_PROCESS_MAPS_H_
#define RINGSIDE_AGENT_SYMBOLS_PROCESS_MAPS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// One line of /proc/<pid>/maps:
//   start-end perms pgoff major:minor inode          path
//   7f2c1a400000-7f2c1a428000 r--p 00000000 08:01 1837   /usr/lib/libc.so.6
struct MapsEntry {
  enum class Kind {
    kAnonymous,  // no path
    kFile,       // a path starting with '/' (perhaps deleted)
    kSpecial,    // anything else: [vdso], [heap], [stack], [anon:NAME], anon_inode:...
  };
  uint64_t start = 0;  // first byte
  uint64_t end = 0;    // one past the last byte
  uint64_t pgoff = 0;  // offset into the file of `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  bool readable = false;
  bool writable = false;
  bool executable = false;
  bool shared = false;  // 's'; 'p' (private, copy-on-write) otherwise
  Kind kind = Kind::kAnonymous;
  // As the kernel wrote it: spaces kept, a newline in a name written "\012",
  // without the " (deleted)" the kernel appends to a file unlinked since it
  // was mapped (then `deleted`). Empty for kAnonymous.
  std::string path;
  bool deleted = false;
};

// The mappings of one process, parsed from the text of /proc/<pid>/maps,
// sorted by start, to find the mapping an instruction address lies in.
//
// The text is the kernel's, but of a process ringside does not trust: a
// path can hold any byte but NUL and '/' is the only rule for a file name,
// so every field is checked and a line that does not parse is skipped and
// counted, never a crash; so is a line overlapping the mapping before it
// (the kernel's never overlap). A file literally named "x (deleted)" reads as a
// deleted "x": callers that open the file check its inode against `inode`.
//
// Immutable once parsed; not tied to a thread.
class ProcessMaps {
 public:
  // Any /proc/<pid>/maps holds far less; a longer file is refused.
  static constexpr size_t kMaxFileBytes = 256 << 20;

  ProcessMaps() = default;

  // Parses maps text. Never fails: bad lines are counted in malformed_lines().
  static ProcessMaps Parse(absl::string_view text);
  // Reads and parses `proc_root`/`pid`/maps (proc_root is "/proc"; tests
  // give their own). Fails with the errno of the read, naming the file:
  // kNotFound when the process is gone, kPermissionDenied without
  // PTRACE_MODE_READ on it (CAP_SYS_PTRACE for a process of another uid).
  static absl::StatusOr<ProcessMaps> Read(const std::string& proc_root, pid_t pid);

  // The mapping `addr` lies in, or null. Valid as long as this object.
  const MapsEntry* Find(uint64_t addr) const;

  const std::vector<MapsEntry>& entries() const { return entries_; }
  size_t malformed_lines() const { return malformed_lines_; }
  size_t memory_bytes() const;

 private:
  std::vector<MapsEntry> entries_;
  size_t malformed_lines_ = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SYMBOLS_PROCESS_MAPS_H_
