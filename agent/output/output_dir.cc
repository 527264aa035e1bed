#include "agent/output/output_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/private_directory.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// Why `name` in `parent_fd` could not be opened as a directory, naming
// `path`: what it is when it is something else.
absl::Status OpenError(int err, int parent_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if ((err == ENOTDIR || err == ELOOP) &&
      fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output_dir ", path, " is ", S_ISLNK(st.st_mode) ? "a symlink" : "not a directory",
        S_ISLNK(st.st_mode) ? "; name the directory it points to" : ""));
  }
  if (err == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat("output_dir ", path, ": one of the directories above it is not a directory"));
  }
  return absl::PermissionDeniedError(base::ErrnoMessage(err, absl::StrCat("output_dir ", path)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputDir>> OutputDir::Open(const std::string& path,
                                                           std::optional<gid_t> group) {
  if (path.empty()) return absl::InvalidArgumentError("no output_dir named");
  // "/a/b/" is "/a/b": its last component is b.
  const std::string trimmed = path.substr(0, std::max<size_t>(path.find_last_not_of('/') + 1, 1));
  base::ScopedFd fd(open(trimmed.c_str(), kDirFlags));
  if (!fd.valid() && errno != ENOENT) return OpenError(errno, AT_FDCWD, trimmed, path);
  if (!fd.valid()) {
    // Missing: from the deepest directory that exists, each missing level
    // made and entered by descriptor, so that nothing made here can be
    // swapped before it is given its owner and mode.
    std::vector<std::string> missing;
    std::string existing = trimmed;
    base::ScopedFd parent;
    while (!parent.valid()) {
      const size_t slash = existing.find_last_of('/');
      const std::string name = existing.substr(slash == std::string::npos ? 0 : slash + 1);
      if (name.empty() || name == "." || name == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat("output_dir ", path, ": cannot create a directory named \"", name, "\""));
      }
      missing.push_back(name);
      existing = slash == std::string::npos ? "." : slash == 0 ? "/" : existing.substr(0, slash);
      parent.reset(open(existing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!parent.valid() && errno != ENOENT) {
        return absl::PermissionDeniedError(base::ErrnoMessage(
            errno, absl::StrCat("cannot create output_dir ", path, ": ", existing)));
      }
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      const bool made = mkdirat(parent.get(), it->c_str(), 0750) == 0;
      if (!made && errno != EEXIST) {
        const int err = errno;
        return absl::PermissionDeniedError(
            base::ErrnoMessage(err, absl::StrCat("cannot create output_dir ", path)));
      }
      base::ScopedFd next(openat(parent.get(), it->c_str(), kDirFlags));
      if (!next.valid()) return OpenError(errno, parent.get(), *it, path);
      parent = std::move(next);
      // Made meanwhile by someone else: not ours to change (checked below
      // if it is the output_dir itself). Made here: the group must reach
      // the files through it; fchmod because the umask may have taken bits.
      if (made &&
          ((group.has_value() && fchown(parent.get(), static_cast<uid_t>(-1), *group) != 0) ||
           fchmod(parent.get(), 0750) != 0)) {
        const int e = errno;
        return absl::PermissionDeniedError(base::ErrnoMessage(
            e, absl::StrCat("cannot give output_dir ", path, " its mode and group ",
                            group.has_value() ? absl::StrCat(*group) : std::string("(none)"))));
      }
    }
    fd = std::move(parent);
  }
  if (absl::Status st =
          base::CheckOnlyWeCanWrite(fd.get(), absl::StrCat("output_dir ", path), "output_dir");
      !st.ok()) {
    return st;
  }
  return std::unique_ptr<OutputDir>(new OutputDir(std::move(fd), path));
}

std::string OutputDir::Join(absl::string_view name) const {
  return path_ == "/" ? absl::StrCat("/", name) : absl::StrCat(path_, "/", name);
}

}  // namespace ringside::agent
