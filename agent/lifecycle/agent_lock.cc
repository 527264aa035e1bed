#include "agent/lifecycle/agent_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/private_directory.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

constexpr char kLockName[] = "agent.lock";
// A lock file is two short lines; anything longer is not ours, and is not
// read past this.
constexpr size_t kMaxLockFileBytes = 4096;
// Each retry means an agent removed the file we had just opened: it takes
// an agent starting and stopping in a loop to exhaust these.
constexpr int kMaxOpenAttempts = 8;

std::string KindOfFile(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "an unknown kind of file";
}

absl::Status NotWhatWeExpect(const std::string& path, mode_t mode, absl::string_view expected) {
  return absl::FailedPreconditionError(absl::StrCat(path, " is ", KindOfFile(mode), ", not ",
                                                    expected, "; ringside leaves it alone"));
}

// When open() refused `name` in `dir_fd` (or the path itself when dir_fd is
// AT_FDCWD) because of what it is, the error that names what it is;
// otherwise the system call's error.
absl::Status OpenError(int err, int dir_fd, const char* name, const std::string& path,
                       bool want_directory) {
  struct stat st;
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !(want_directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
    return NotWhatWeExpect(path, st.st_mode, want_directory ? "a directory" : "a regular file");
  }
  return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", path));
}

absl::Status CheckRunDir(int dir_fd, const std::string& run_dir) {
  return base::CheckOnlyWeCanWrite(dir_fd, absl::StrCat("the run directory ", run_dir),
                                   "--run-dir");
}

// Opens `run_dir` without following a symlink, creating it (one level) when
// it is missing.
absl::StatusOr<base::ScopedFd> OpenRunDir(const std::string& run_dir) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  if (base::ScopedFd fd(open(run_dir.c_str(), kFlags)); fd.valid()) {
    if (absl::Status st = CheckRunDir(fd.get(), run_dir); !st.ok()) return st;
    return fd;
  }
  if (errno != ENOENT) {
    return OpenError(errno, AT_FDCWD, run_dir.c_str(), run_dir, true);
  }
  const bool created = mkdir(run_dir.c_str(), 0755) == 0;
  if (!created && errno != EEXIST) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("cannot create the run directory ", run_dir,
                                              ": its parent directory does not exist"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create the run directory ", run_dir));
  }
  base::ScopedFd fd(open(run_dir.c_str(), kFlags));
  if (!fd.valid()) return OpenError(errno, AT_FDCWD, run_dir.c_str(), run_dir, true);
  // The umask must not make it unreadable to the clients that look for the
  // socket in it.
  if (created && fchmod(fd.get(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot chmod 0755 ", run_dir));
  }
  if (absl::Status st = CheckRunDir(fd.get(), run_dir); !st.ok()) return st;
  return fd;
}

absl::StatusOr<base::ScopedFd> OpenLockFile(int dir_fd, const std::string& path) {
  struct stat st;
  // Checked before open() too, so that a device or FIFO is never opened.
  if (fstatat(dir_fd, kLockName, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    return NotWhatWeExpect(path, st.st_mode, "a regular file");
  }
  base::ScopedFd fd(
      openat(dir_fd, kLockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
  if (!fd.valid()) return OpenError(errno, dir_fd, kLockName, path, false);
  if (fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) return NotWhatWeExpect(path, st.st_mode, "a regular file");
  // Ours has one name and our owner; anything else (a hard link to another
  // file) is not written to.
  if (st.st_uid != geteuid() || st.st_nlink != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a lock file of ringside's (owner uid ", st.st_uid, ", ",
                     st.st_nlink, " links); ringside leaves it alone"));
  }
  return fd;
}

// Up to kMaxLockFileBytes of the file, from its start.
absl::StatusOr<std::string> ReadContents(int fd) {
  std::string contents(kMaxLockFileBytes, '\0');
  size_t used = 0;
  while (used < contents.size()) {
    const ssize_t n = base::RetryOnEintr(
        [&] { return pread(fd, contents.data() + used, contents.size() - used, used); });
    if (n < 0) return absl::ErrnoToStatus(errno, "read");
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  contents.resize(used);
  return contents;
}

// True when `name` in `dir_fd` is the file `fd` is open on: false once an
// exiting agent unlinked it (or a new one replaced it) after we opened it.
bool IsStillTheFileAtPath(int fd, int dir_fd) {
  struct stat held;
  struct stat at_path;
  if (fstat(fd, &held) != 0) return false;
  if (fstatat(dir_fd, kLockName, &at_path, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return held.st_dev == at_path.st_dev && held.st_ino == at_path.st_ino;
}

std::string HeldByMessage(const std::string& path, const absl::StatusOr<std::string>& contents) {
  if (!contents.ok()) {
    return absl::StrCat("another ringside agent is running (lock file ", path,
                        " is locked, and unreadable: ", contents.status().message(), ")");
  }
  const std::optional<AgentLock::Holder> holder = ParseLockHolder(*contents);
  if (!holder.has_value()) {
    return absl::StrCat("another ringside agent is running (lock file ", path,
                        " is locked but does not name its pid)");
  }
  return absl::StrCat("another ringside agent is running: pid ", holder->pid, ", control socket ",
                      holder->socket.empty() ? "unknown" : holder->socket, " (lock file ", path,
                      ")");
}

}  // namespace

std::optional<AgentLock::Holder> ParseLockHolder(absl::string_view contents) {
  AgentLock::Holder holder;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    int64_t pid = 0;
    if (absl::ConsumePrefix(&line, "pid ")) {
      if (!absl::SimpleAtoi(line, &pid) || pid <= 0 || pid > INT_MAX) return std::nullopt;
      holder.pid = static_cast<pid_t>(pid);
    } else if (absl::ConsumePrefix(&line, "socket ")) {
      holder.socket = std::string(line);
    }
  }
  if (holder.pid == 0) return std::nullopt;
  return holder;
}

absl::StatusOr<std::unique_ptr<AgentLock>> AgentLock::Acquire(const std::string& run_dir,
                                                              const std::string& socket_path) {
  return Take(run_dir, socket_path, nullptr);
}

absl::StatusOr<std::unique_ptr<AgentLock>> AgentLock::AcquireForTesting(
    const std::string& run_dir, const std::string& socket_path,
    const std::function<void()>& after_open) {
  return Take(run_dir, socket_path, after_open);
}

absl::StatusOr<std::unique_ptr<AgentLock>> AgentLock::Take(
    const std::string& run_dir, const std::string& socket_path,
    const std::function<void()>& after_open) {
  if (socket_path.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError("the control socket path contains a newline");
  }
  absl::StatusOr<base::ScopedFd> dir_fd = OpenRunDir(run_dir);
  if (!dir_fd.ok()) return dir_fd.status();
  std::unique_ptr<AgentLock> lock(new AgentLock());
  lock->dir_fd_ = *std::move(dir_fd);
  lock->path_ = absl::StrCat(absl::StripSuffix(run_dir, "/"), "/", kLockName);

  for (int attempt = 0; attempt < kMaxOpenAttempts && !lock->fd_.valid(); ++attempt) {
    absl::StatusOr<base::ScopedFd> fd = OpenLockFile(lock->dir_fd_.get(), lock->path_);
    if (!fd.ok()) return fd.status();
    if (after_open) after_open();
    if (flock(fd->get(), LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      return err == EWOULDBLOCK
                 ? absl::AlreadyExistsError(HeldByMessage(lock->path_, ReadContents(fd->get())))
                 : absl::ErrnoToStatus(err, absl::StrCat("cannot lock ", lock->path_));
    }
    // Not the file at the path any more: closed, and another round.
    if (IsStillTheFileAtPath(fd->get(), lock->dir_fd_.get())) lock->fd_ = *std::move(fd);
  }
  if (!lock->fd_.valid()) {
    return absl::UnavailableError(
        absl::StrCat("lock file ", lock->path_,
                     " was removed each time we locked it: another ringside agent is starting "
                     "and stopping; try again"));
  }

  absl::StatusOr<std::string> previous = ReadContents(lock->fd_.get());
  if (!previous.ok()) {
    return absl::Status(previous.status().code(),
                        absl::StrCat(lock->path_, ": ", previous.status().message()));
  }
  lock->stale_holder_ = ParseLockHolder(*previous);

  const std::string contents = absl::StrCat("pid ", getpid(), "\nsocket ", socket_path, "\n");
  if (ftruncate(lock->fd_.get(), 0) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot truncate ", lock->path_));
  }
  if (const base::IoResult w = base::WriteAllAt(lock->fd_.get(), contents, 0); !w.ok()) {
    return base::ErrnoToStatus(w.err, absl::StrCat(lock->path_, ": write"));
  }
  if (fsync(lock->fd_.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync ", lock->path_));
  }
  struct stat st;
  if (fstat(lock->fd_.get(), &st) == 0 && (st.st_mode & 07777) != 0644) {
    fchmod(lock->fd_.get(), 0644);
  }
  return lock;
}

AgentLock::~AgentLock() {
  if (fd_.valid()) {
    // Unlinked while still locked: an agent starting now either opened this
    // file and will see it gone after its flock, or creates a new one.
    if (IsStillTheFileAtPath(fd_.get(), dir_fd_.get())) unlinkat(dir_fd_.get(), kLockName, 0);
    fd_.reset();  // Only now is the lock released.
  }
}

absl::StatusOr<AgentLock::Holder> ReadLockHolder(const std::string& lock_path) {
  base::ScopedFd fd(open(lock_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no lock file at ", lock_path));
    return OpenError(errno, AT_FDCWD, lock_path.c_str(), lock_path, false);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", lock_path));
  }
  if (!S_ISREG(st.st_mode)) return NotWhatWeExpect(lock_path, st.st_mode, "a regular file");
  absl::StatusOr<std::string> contents = ReadContents(fd.get());
  fd.reset();
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(lock_path, ": ", contents.status().message()));
  }
  if (contents->empty())
    return absl::NotFoundError(absl::StrCat("lock file ", lock_path, " is empty"));
  std::optional<AgentLock::Holder> holder = ParseLockHolder(*contents);
  if (!holder.has_value()) {
    return absl::DataLossError(absl::StrCat("lock file ", lock_path, " does not name a pid"));
  }
  return *holder;
}

}  // namespace ringside::agent
