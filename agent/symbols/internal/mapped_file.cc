#include "agent/symbols/internal/mapped_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status.h"

namespace ringside::agent::internal {
namespace {

// Checks that `path_fd` (O_PATH) is a regular file of at most `max_bytes`,
// with inode `want_inode` unless 0.
absl::StatusOr<MappedFile> CheckRegularFile(base::ScopedFd path_fd, const std::string& what,
                                            uint64_t max_bytes, uint64_t want_inode) {
  MappedFile file;
  if (fstat(path_fd.get(), &file.st) != 0) return base::ErrnoStatus("fstat " + what);
  if (!S_ISREG(file.st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": not a regular file"));
  }
  if (want_inode != 0 && file.st.st_ino != want_inode) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": inode ", file.st.st_ino,
                                                      ", not the mapped file's ", want_inode,
                                                      " (replaced since it was mapped)"));
  }
  if (file.st.st_size < 0 || static_cast<uint64_t>(file.st.st_size) > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": ", file.st.st_size,
                                                     " bytes, over the ", max_bytes,
                                                     " a binary may have to be read"));
  }
  file.path_fd = std::move(path_fd);
  file.what = what;
  return file;
}

absl::StatusOr<MappedFile> OpenThroughMapFiles(const std::string& proc_root, pid_t pid,
                                               const MapsEntry& mapping, uint64_t max_bytes) {
  const std::string link = absl::StrCat(proc_root, "/", pid, "/map_files/",
                                        absl::Hex(mapping.start), "-", absl::Hex(mapping.end));
  base::ScopedFd path_fd(
      base::RetryOnEintr([&] { return open(link.c_str(), O_PATH | O_CLOEXEC); }));
  if (!path_fd) return base::ErrnoStatus("opening " + link);
  return CheckRegularFile(std::move(path_fd), link, max_bytes, /*want_inode=*/0);
}

absl::StatusOr<MappedFile> OpenInRoot(const std::string& proc_root, pid_t pid,
                                      const MapsEntry& mapping, uint64_t max_bytes) {
  const std::string root = absl::StrCat(proc_root, "/", pid, "/root");
  const std::string what = absl::StrCat(mapping.path, " under ", root);
  base::ScopedFd root_fd(
      base::RetryOnEintr([&] { return open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); }));
  if (!root_fd) return base::ErrnoStatus("opening " + root);
  open_how how = {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  base::ScopedFd path_fd(base::RetryOnEintr([&] {
    return static_cast<int>(
        syscall(SYS_openat2, root_fd.get(), mapping.path.c_str(), &how, sizeof(how)));
  }));
  if (!path_fd) return base::ErrnoStatus("openat2 " + what);
  return CheckRegularFile(std::move(path_fd), what, max_bytes, mapping.inode);
}

}  // namespace

absl::StatusOr<base::ScopedFd> MappedFile::OpenForReading() const {
  // An O_PATH descriptor is reopened through its magic link.
  const std::string self = absl::StrCat("/proc/self/fd/", path_fd.get());
  base::ScopedFd fd(base::RetryOnEintr(
      [&] { return open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); }));
  if (!fd) return base::ErrnoStatus("opening " + what);
  return fd;
}

absl::StatusOr<MappedFile> OpenMappedFile(const std::string& proc_root, pid_t pid,
                                          const MapsEntry& mapping, uint64_t max_bytes) {
  absl::StatusOr<MappedFile> file = OpenThroughMapFiles(proc_root, pid, mapping, max_bytes);
  // Only a lookup that failed falls back to the path; a file found and
  // refused (not regular, too big) stays refused.
  if (file.ok() || !(absl::IsNotFound(file.status()) || absl::IsPermissionDenied(file.status()))) {
    return file;
  }
  if (mapping.deleted) {
    return absl::NotFoundError(absl::StrCat("pid ", pid, ": ", mapping.path,
                                            " was deleted since it was mapped and map_files is ",
                                            "unreadable (", file.status().message(), ")"));
  }
  return OpenInRoot(proc_root, pid, mapping, max_bytes);
}

}  // namespace ringside::agent::internal
