#ifndef RINGSIDE_AGENT_OUTPUT_OUTPUT_FILE_H_
#define RINGSIDE_AGENT_OUTPUT_OUTPUT_FILE_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/tracefile/trace_sink.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// The file a trace goes to, checked and prepared before anything is
// recorded, so that a path that cannot work fails at once instead of after
// the recording, and so that ringside, running as root, never replaces what
// is not a trace file of the user's.
//
// What -o may name:
//   - a new name in an existing directory, or an existing regular file;
//   - a symlink of the caller's own (or root's in a directory only root may
//     write, as /dev/stdout is): the file it points to, under the same rules
//     (as perf and a shell's `>` do). Followed the way the kernel follows it
//     on open, so fs.protected_symlinks still guards sticky world-writable
//     directories; a dangling link is refused. A symlink of another user is
//     refused unless the caller asks (Symlinks::kFollowAny): run as root,
//     ringside would otherwise replace whatever file another user pointed
//     it at (a symlink planted at the output name in a directory they own);
//   - "-": standard output (not a terminal); a pipe or FIFO (`>(gzip)`,
//     /dev/fd/N): written in order as a stream, never renamed or truncated.
// Refused, naming what the path is: directories, devices (/dev/null too),
// sockets, and files on kernel filesystems (proc, sysfs, tracefs, debugfs,
// cgroup, bpf, securityfs, configfs), where a "file" is a kernel setting.
//
// The two file sinks (TraceSink):
//   - kWholeFile: written to a temporary file created (O_EXCL) at Open() in
//     the target's directory, with the space the trace can need reserved by
//     fallocate, then at Finish() cut to size, fsynced and renamed over the
//     target: a reader sees either the old file or the whole new one, and a
//     full disk is found before recording rather than at the end. The
//     temporary file is flock'ed while open, so that one a killed writer
//     left behind can be told from one being written
//     (RemoveDeadTemporaryFiles);
//   - kStreaming: whole packets appended to the target while recording, so
//     it is a valid trace at every moment; a short write (a full disk) is
//     cut back to the last whole packet and may be retried.
// Not thread-safe.
class OutputFile : public TraceSink {
 public:
  enum class Mode {
    kWholeFile,  // Into the temporary file; in place at Finish().
    kStreaming,  // Into the target as it is written.
  };

  // Which symlinks at the path Open() follows (the last component's; the
  // directories' are the kernel's to guard).
  enum class Symlinks {
    kFollowOwn,  // The caller's own, and root's in a directory only root may write.
    kFollowAny,  // Any (`--follow-symlink`): the caller vouches for the link.
  };

  // REQUIRES: for kWholeFile, `reserve_bytes` is an upper bound of the size
  // of the finished trace (0: reserve nothing).
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& path, Mode mode,
                                                          uint64_t reserve_bytes,
                                                          Symlinks symlinks = Symlinks::kFollowOwn);
  // A kWholeFile of the agent's own: its temporary file is created in the
  // directory `dir_fd` (O_EXCL, never through a symlink), and Finish()
  // gives it the name `name` there only if that name is free
  // (renameat2 RENAME_NOREPLACE): whatever appeared at the name meanwhile,
  // a symlink included, is neither followed nor replaced, and the file
  // takes the first free name of "<stem>-2<ext>", "-3"... instead
  // (display_name() says which). `display_name` is the path messages call
  // it by. `dir_fd` stays the caller's; a duplicate is kept.
  static absl::StatusOr<std::unique_ptr<OutputFile>> CreateWholeIn(int dir_fd,
                                                                   const std::string& name,
                                                                   const std::string& display_name,
                                                                   uint64_t reserve_bytes);
  // A kStreaming file of the agent's own, `name` created new in the
  // directory `dir_fd` (O_EXCL, never through a symlink) with `mode`.
  // kAlreadyExists when the name is taken.
  static absl::StatusOr<std::unique_ptr<OutputFile>> CreateNew(int dir_fd, const std::string& name,
                                                               const std::string& display_name,
                                                               mode_t mode);
  ~OutputFile() override;  // Removes the temporary file of an unfinished kWholeFile.

  // Appends `packets` (whole packets). On failure (a full disk) a regular
  // file is cut back to its last whole packet, so it stays a valid trace,
  // and the caller may retry the same bytes later.
  absl::Status Write(absl::string_view packets) override;
  // kWholeFile: cuts the reserve off, fsyncs and renames the temporary file
  // over the target (never over what became a non-file meanwhile).
  // kStreaming: fsyncs what was written.
  absl::Status Finish() override;

  // Makes the file 0640 owned by group `gid` (config output_group) instead
  // of 0600. REQUIRES: kWholeFile before Finish(), or a file of CreateNew()
  // not yet renamed, so the file appears under its final name with its
  // final mode.
  absl::Status ShareWithGroup(gid_t gid);

  // What the user named, for messages ("standard output" for "-"); of a
  // CreateWholeIn() file, after Finish(), the path it was given.
  const std::string& display_name() const override { return display_name_; }
  uint64_t bytes_written() const override { return bytes_written_; }
  // A pipe, FIFO or standard output.
  bool is_stream() const { return is_stream_; }
  // Set at Open() when the space could not be reserved ahead (a filesystem
  // without fallocate): a full disk may then only show at the end.
  const std::string& warning() const { return warning_; }

 private:
  OutputFile() = default;
  // Open() of a kStreaming file: the target (final_path_) opened and cut
  // to nothing, once it is seen to be a regular file. `path` is what the
  // user named.
  absl::Status OpenTargetInPlace(const std::string& path);
  // Open() of a kWholeFile: the temporary file created (and locked) in
  // final_path_'s directory, with `reserve_bytes` reserved.
  absl::Status CreateTemporaryBeside(const std::string& path, uint64_t reserve_bytes);
  // Reserves `reserve_bytes` of disk for the file; kResourceExhausted when
  // `dir` has not the room, a warning() when it cannot tell.
  absl::Status Reserve(uint64_t reserve_bytes, const std::string& dir);
  // Finish() of a CreateWholeIn() file, once written and closed.
  absl::Status CommitInDirectory();
  // The descriptor written to: fd_, or standard output; -1 once finished.
  int fd() const { return to_stdout_ ? STDOUT_FILENO : fd_.get(); }
  std::string display_name_;
  // The resolved target (symlinks followed); for CreateWholeIn() its name
  // in dir_fd_.
  std::string final_path_;
  // kWholeFile to a regular file, until Finish(); for CreateWholeIn() its
  // name in dir_fd_.
  std::string temp_path_;
  base::ScopedFd dir_fd_;  // CreateWholeIn(): its own duplicate of the directory.
  std::string warning_;
  Mode mode_ = Mode::kWholeFile;
  bool is_stream_ = false;
  // "-": fd() is standard output, which is not ours to close.
  bool to_stdout_ = false;
  // The file, ours; none for standard output, and once a kWholeFile is
  // finished.
  base::ScopedFd fd_;
  uint64_t bytes_written_ = 0;
};

// A file of a new random hidden name (".ringside-XXXXXX", mkostemp's kind,
// a name RemoveDeadTemporaryFiles knows) in the directory `dir_fd`: created
// O_EXCL with `mode` (less the umask), never through a symlink, and
// flock'ed, so that a clean-up tells it from one a dead writer left. A name
// taken (by anything: a file, a directory, a symlink) is left alone and
// another tried. Returns 0, or the errno that stopped it (EEXIST: 100 names
// tried, all taken).
struct TemporaryFile {
  base::ScopedFd fd;
  std::string name;  // Relative to the directory.
};
int CreateTemporaryIn(int dir_fd, mode_t mode, TemporaryFile* out);

struct RemovedTemporaries {
  uint64_t files = 0;
  uint64_t bytes = 0;  // Disk space they held (their reserve included).
};
// Removes from `dir` the temporary files of kWholeFile writers that died
// before Finish() (a kill -9 mid-write): names OutputFile makes, regular
// files of ours with one link that no process holds locked. Never follows
// a symlink nor touches anything else. Best effort: what cannot be checked
// is left alone.
RemovedTemporaries RemoveDeadTemporaryFiles(const std::string& dir);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_OUTPUT_FILE_H_
