#ifndef RINGSIDE_AGENT_OUTPUT_OUTPUT_DIR_H_
#define RINGSIDE_AGENT_OUTPUT_OUTPUT_DIR_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// The agent's output directory (output_dir: snapshots and streamed files),
// held open by descriptor.
//
// The agent runs as root and writes there on events others can cause (a
// crash of their own fires the `crash` trigger), under names they can
// predict. So the directory must be one that only the agent's user can
// change: one another user owns or can write could have a symlink or a hard
// link planted at the next file's name, and the agent would write through it
// into any file of the machine. Open() refuses such a directory, naming it;
// every file is then created, renamed and deleted relative to the
// descriptor (openat, renameat2, unlinkat), never following a symlink, so
// that a path component swapped afterwards changes nothing either.
//
// Not thread-safe; the descriptor itself may be used from any thread.
class OutputDir {
 public:
  // Opens `path` (the final component not through a symlink), creating it
  // and its missing parents when it does not exist: mode 0750, owned by
  // `group` when given (output_group, whose members then reach the files),
  // by descriptor (fchown, fchmod). Directories that exist keep their owner
  // and mode.
  // Errors: kFailedPrecondition when it is not a directory (a symlink
  // included), belongs to another user or can be written by others,
  // naming which and what to do; kPermissionDenied and others naming the
  // path and the system's reason.
  static absl::StatusOr<std::unique_ptr<OutputDir>> Open(const std::string& path,
                                                         std::optional<gid_t> group);
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // "<path>/<name>", for messages and for what callers report.
  std::string Join(absl::string_view name) const;

 private:
  OutputDir(base::ScopedFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  const base::ScopedFd fd_;
  const std::string path_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_OUTPUT_DIR_H_
