#include "agent/control/control_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/private_directory.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string KindOfFile(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a socket";
}

// The socket's directory `dir`, opened once (O_NOFOLLOW) and refused
// unless only we can write it.
absl::StatusOr<base::ScopedFd> OpenCheckedDirectory(const std::string& path,
                                                    const std::string& dir) {
  base::ScopedFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot create the control socket ", path, ": ");
    struct stat st;
    if (err == ENOENT) return absl::NotFoundError(what + "its directory does not exist");
    if ((err == ELOOP || err == ENOTDIR) && lstat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, dir, " is ", KindOfFile(st.st_mode),
                       ", not a directory; ringside leaves it alone"));
    }
    if (err == EACCES) return absl::PermissionDeniedError(what + Errno(err));
    return absl::InternalError(what + Errno(err));
  }
  if (absl::Status st = base::CheckOnlyWeCanWrite(
          dir_fd.get(), absl::StrCat("the control socket's directory ", dir),
          "control_socket, --socket");
      !st.ok()) {
    return st;
  }
  return dir_fd;
}

// Frees `name` in the directory for the socket: nothing there, or a stale
// socket removed when `replace_stale_socket`; anything else is refused.
absl::Status RemoveStaleSocket(int dir_fd, const std::string& path, const std::string& name,
                               bool replace_stale_socket) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("control socket path ", path, " is ", KindOfFile(st.st_mode),
                       ", not a socket; refusing to replace it (remove it, or set "
                       "control_socket to another path)"));
    }
    if (!replace_stale_socket) {
      return absl::AlreadyExistsError(absl::StrCat(
          "control socket ", path, " exists already; is another ringside agent running?"));
    }
    if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot remove the stale control socket ", path, ": ", Errno(errno)));
    }
  } else if (errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", Errno(errno)));
  }
  return absl::OkStatus();
}

// A socket bound to `name` in the directory: its fd, not yet listening.
absl::StatusOr<base::ScopedFd> BindSocket(int dir_fd, const std::string& path,
                                          const std::string& name) {
  // bind() takes a path, not a directory descriptor: "/proc/self/fd/N/NAME"
  // resolves through the directory opened above, whatever has become of
  // `dir` since.
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  const std::string bind_path = absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
  if (bind_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "control socket file name '", name, "' is ", name.size(), " bytes long; at most ",
        sizeof(addr.sun_path) - 1 - (bind_path.size() - name.size())));
  }
  std::memcpy(addr.sun_path, bind_path.data(), bind_path.size());
  base::ScopedFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", Errno(errno)));
  // bind() creates the file with the socket's own mode less the umask: set
  // it first, so that the file is never looser than 0660.
  fchmod(fd.get(), 0660);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot create the control socket ", path, ": ");
    if (err == EADDRINUSE) return absl::AlreadyExistsError(what + "the path was just taken");
    if (err == EACCES) return absl::PermissionDeniedError(what + Errno(err));
    return absl::InternalError(what + Errno(err));
  }
  return fd;
}

// Gives the bound socket's file `group` and mode 0660; returns its stat,
// checked to be a socket still.
absl::StatusOr<struct stat> SetGroupAndMode(int dir_fd, const std::string& path,
                                            const std::string& name, std::optional<gid_t> group) {
  // The group, and the mode again (the umask may have taken the group's
  // bits), by name in the checked directory, never following a symlink:
  // fchownat() and fchmodat() with AT_SYMLINK_NOFOLLOW. A socket has no
  // descriptor of its file (the socket's fd is sockfs's inode, not the
  // file's) to fchmod; glibc does fchmodat(AT_SYMLINK_NOFOLLOW) through an
  // O_PATH descriptor and /proc/self/fd (or fchmodat2 on 6.6+), and refuses
  // a symlink with EOPNOTSUPP, on every kernel from 5.10.
  if (group.has_value() &&
      fchownat(dir_fd, name.c_str(), static_cast<uid_t>(-1), *group, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot give the control socket ", path,
                                                    " to gid ", *group, ": ", Errno(errno)));
  }
  struct stat st;
  if (fchmodat(dir_fd, name.c_str(), 0660, AT_SYMLINK_NOFOLLOW) != 0 ||
      fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot set the mode of the control socket ", path, ": ", Errno(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::InternalError(absl::StrCat("the control socket ", path, " was replaced by ",
                                            KindOfFile(st.st_mode), " as it was made"));
  }
  return st;
}

}  // namespace

absl::StatusOr<ControlSocket> CreateControlSocket(const std::string& path,
                                                  std::optional<gid_t> group,
                                                  bool replace_stale_socket,
                                                  const std::function<void()>& after_bind) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "control socket path '", path, "' is ", path.size(),
        " bytes long; a unix socket path has 1 to ", sizeof(sockaddr_un{}.sun_path) - 1));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("control socket path '", path, "' does not name a file"));
  }

  // Everything below works in this directory, opened once and checked: no
  // other user can plant or swap a name in it, and a directory or symlink
  // swapped in above it later changes nothing.
  absl::StatusOr<base::ScopedFd> dir_fd = OpenCheckedDirectory(path, dir);
  if (!dir_fd.ok()) return dir_fd.status();
  if (absl::Status st = RemoveStaleSocket(dir_fd->get(), path, name, replace_stale_socket);
      !st.ok()) {
    return st;
  }
  absl::StatusOr<base::ScopedFd> fd = BindSocket(dir_fd->get(), path, name);
  if (!fd.ok()) return fd.status();
  // The socket closed and its file removed; the directory closes after.
  auto fail = [&](absl::Status status) {
    fd->reset();
    unlinkat(dir_fd->get(), name.c_str(), 0);
    return status;
  };
  if (after_bind) after_bind();
  const absl::StatusOr<struct stat> file = SetGroupAndMode(dir_fd->get(), path, name, group);
  if (!file.ok()) return fail(file.status());
  if (listen(fd->get(), 64) != 0) {
    return fail(absl::InternalError(absl::StrCat("listen(", path, "): ", Errno(errno))));
  }
  return ControlSocket{*std::move(fd), *std::move(dir_fd), name, file->st_dev, file->st_ino};
}

}  // namespace ringside::agent
