#include "agent/output/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/dir_stream.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

// The temporary files of kWholeFile writers: mkostemp's names.
constexpr char kTempPrefix[] = ".ringside-";
constexpr size_t kTempSuffixSize = 6;  // mkostemp's XXXXXX.

// Filesystems whose files are kernel settings and state, not storage.
struct KernelFs {
  int64_t magic;
  const char* name;
};
constexpr KernelFs kKernelFilesystems[] = {
    {PROC_SUPER_MAGIC, "proc"},     {SYSFS_MAGIC, "sysfs"},
    {TRACEFS_MAGIC, "tracefs"},     {DEBUGFS_MAGIC, "debugfs"},
    {CGROUP_SUPER_MAGIC, "cgroup"}, {CGROUP2_SUPER_MAGIC, "cgroup2"},
    {BPF_FS_MAGIC, "bpf"},          {SECURITYFS_MAGIC, "securityfs"},
    {0x62656570, "configfs"},       {DEVPTS_SUPER_MAGIC, "devpts"},
};

const char* TypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The final path is a new name, or a regular file, in a directory we may
// write, on a filesystem that stores files.
absl::Status CheckDirectory(const std::string& shown, const std::string& final_path) {
  const std::string dir = DirOf(final_path);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", shown, ": ", dir)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", shown, ": ", dir, " is not a directory"));
  }
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) == 0) {
    for (const KernelFs& k : kKernelFilesystems) {
      if (static_cast<int64_t>(fs.f_type) == k.magic) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot write ", shown, ": ", dir, " is on ", k.name,
                         ", whose files are kernel settings, not storage"));
      }
    }
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", shown, ": ", dir)));
  }
  const size_t slash = final_path.rfind('/');
  const size_t base =
      slash == std::string::npos ? final_path.size() : final_path.size() - slash - 1;
  if (base > NAME_MAX || final_path.size() >= PATH_MAX) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", shown, ": ", std::strerror(ENAMETOOLONG)));
  }
  return absl::OkStatus();
}

// Whether the symlink `link` (its lstat) at `path` may be followed without
// being asked to: it is the caller's own, or root's in a directory that only
// root may write (/dev/stdout), which no other user can have planted.
bool IsTrustedSymlink(const struct stat& link, const std::string& path) {
  if (link.st_uid == geteuid()) return true;
  if (link.st_uid != 0) return false;
  struct stat dir;
  return stat(DirOf(path).c_str(), &dir) == 0 && dir.st_uid == 0 &&
         (dir.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::string LinkTarget(const std::string& path) {
  std::vector<char> to(PATH_MAX + 1);
  const ssize_t len = readlink(path.c_str(), to.data(), to.size() - 1);
  return len > 0 ? std::string(to.data(), static_cast<size_t>(len)) : "nothing";
}

// Follows the symlink at `path` (its lstat in `st`) as open() follows it,
// if `symlinks` lets it: `st` becomes the target's, and `final_path` the
// target's own path when it is a regular file. Refuses a link of another
// user, a dangling link and a link swapped while it was checked.
absl::Status FollowSymlink(const std::string& path, OutputFile::Symlinks symlinks, struct stat& st,
                           std::string& final_path) {
  if (symlinks == OutputFile::Symlinks::kFollowOwn && !IsTrustedSymlink(st, path)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot write ", path, ": it is a symlink to ", LinkTarget(path), " owned by uid ",
        st.st_uid, ", not by you (uid ", geteuid(),
        "); ringside follows only its caller's own symlinks, as one planted by another "
        "user would have it replace their choice of file. Give the target's own path, or "
        "--follow-symlink if you trust the link"));
  }
  const struct stat link = st;
  // Followed as open() follows it (fs.protected_symlinks applies), then
  // named by what it resolved to.
  base::ScopedFd target(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!target.valid() && errno == ENOENT) {
    // Dangling: never created through the link, which is how a program
    // running as root writes where it should not.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": it is a symlink to ", LinkTarget(path),
                     ", which does not exist; ringside creates no file through a link (give "
                     "the target's own path)"));
  }
  // The link checked must be the link followed: one swapped in between
  // is refused rather than trusted by the first one's owner.
  struct stat again;
  if (target.valid() && (lstat(path.c_str(), &again) != 0 || again.st_dev != link.st_dev ||
                         again.st_ino != link.st_ino || again.st_uid != link.st_uid)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": the symlink changed while it was checked"));
  }
  if (!target.valid()) {
    return absl::FailedPreconditionError(base::ErrnoMessage(
        errno, absl::StrCat("cannot write ", path, ": it is a symlink that cannot be followed")));
  }
  const int fstat_ok = fstat(target.get(), &st);
  std::vector<char> buf(PATH_MAX + 1);
  const ssize_t n =
      readlink(absl::StrCat("/proc/self/fd/", target.get()).c_str(), buf.data(), buf.size() - 1);
  target.reset();
  if (fstat_ok != 0) {
    return absl::FailedPreconditionError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", path)));
  }
  if (S_ISREG(st.st_mode)) {
    if (n <= 0 || buf[0] != '/') {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot write ", path, ": cannot tell where the symlink points (is /proc mounted?)"));
    }
    final_path.assign(buf.data(), static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The pipe or FIFO at `path`, opened to be written in order. A FIFO
// without a reader is an error now rather than a recording that blocks at
// the end.
absl::StatusOr<base::ScopedFd> OpenFifo(const std::string& path) {
  base::ScopedFd fd(open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::FailedPreconditionError(base::ErrnoMessage(
        errno,
        absl::StrCat("cannot write ", path, errno == ENXIO ? ": the FIFO has no reader" : "")));
  }
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& path, Mode mode,
                                                             uint64_t reserve_bytes,
                                                             Symlinks symlinks) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->mode_ = mode;
  out->display_name_ = path == "-" ? "standard output" : path;
  if (path.empty()) return absl::InvalidArgumentError("no output file named");
  if (path == "-") {
    if (isatty(STDOUT_FILENO)) {
      return absl::FailedPreconditionError(
          "-o -: standard output is a terminal; redirect it (-o - > FILE, -o - | CMD) or name a "
          "file");
    }
    out->to_stdout_ = true;
    out->is_stream_ = true;
    return out;
  }
  std::string final_path = path;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(
          base::ErrnoMessage(errno, absl::StrCat("cannot write ", path)));
    }
  } else {
    if (S_ISLNK(st.st_mode)) {
      if (absl::Status s = FollowSymlink(path, symlinks, st, final_path); !s.ok()) return s;
    }
    if (S_ISFIFO(st.st_mode)) {
      absl::StatusOr<base::ScopedFd> fd = OpenFifo(path);
      if (!fd.ok()) return fd.status();
      out->fd_ = *std::move(fd);
      out->is_stream_ = true;
      return out;
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot write ", path, ": it is ", TypeName(st.st_mode),
          "; ringside writes traces only to regular files (-o - for standard output)"));
    }
  }
  if (absl::Status s = CheckDirectory(path, final_path); !s.ok()) return s;
  out->final_path_ = final_path;
  absl::Status opened = mode == Mode::kStreaming ? out->OpenTargetInPlace(path)
                                                 : out->CreateTemporaryBeside(path, reserve_bytes);
  if (!opened.ok()) return opened;
  return out;
}

absl::Status OutputFile::OpenTargetInPlace(const std::string& path) {
  // No O_TRUNC before the type is checked: a name swapped for a device
  // since lstat() must not be truncated.
  fd_.reset(
      open(final_path_.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!fd_.valid()) {
    return absl::PermissionDeniedError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", path)));
  }
  struct stat st;
  if (fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": it is no longer a regular file"));
  }
  fcntl(fd_.get(), F_SETFL, fcntl(fd_.get(), F_GETFL) & ~O_NONBLOCK);
  if (ftruncate(fd_.get(), 0) != 0) {
    return absl::PermissionDeniedError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", path)));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::CreateTemporaryBeside(const std::string& path, uint64_t reserve_bytes) {
  const std::string dir = DirOf(final_path_);
  std::string temp = dir + "/.ringside-XXXXXX";
  fd_.reset(mkostemp(temp.data(), O_CLOEXEC));  // 0600.
  if (!fd_.valid()) {
    return absl::PermissionDeniedError(base::ErrnoMessage(
        errno, absl::StrCat("cannot write ", path, ": creating a temporary file in ", dir)));
  }
  temp_path_ = temp;
  flock(fd_.get(), LOCK_EX | LOCK_NB);  // A new file: nobody else can hold it.
  return Reserve(reserve_bytes, dir);
}

absl::Status OutputFile::Reserve(uint64_t reserve_bytes, const std::string& dir) {
  if (reserve_bytes == 0) return absl::OkStatus();
  const int err = posix_fallocate(fd_.get(), 0, static_cast<off_t>(reserve_bytes));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot write ", display_name_, ": the trace can need ",
                     (reserve_bytes + (1 << 20) - 1) >> 20, " MiB (the size of its buffers) and ",
                     dir, " has not that much room: ", std::strerror(err),
                     ". Free some space, name another -o, or use smaller buffers (-b)"));
  }
  if (err != 0) {
    warning_ = absl::StrCat("cannot reserve room for ", display_name_, " ahead (",
                            std::strerror(err), "): a full disk would only show at the end");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::CreateWholeIn(
    int dir_fd, const std::string& name, const std::string& display_name, uint64_t reserve_bytes) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->mode_ = Mode::kWholeFile;
  out->display_name_ = display_name;
  out->final_path_ = name;
  out->dir_fd_.reset(fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (!out->dir_fd_.valid()) {
    return absl::UnavailableError(
        base::ErrnoMessage(errno, absl::StrCat("cannot write ", display_name)));
  }
  TemporaryFile temp;
  if (const int err = CreateTemporaryIn(out->dir_fd_.get(), 0600, &temp); err != 0) {
    if (err == EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", display_name, ": no free temporary name beside it"));
    }
    const std::string message = base::ErrnoMessage(
        err, absl::StrCat("cannot write ", display_name, ": creating a temporary file beside it"));
    if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
    return absl::PermissionDeniedError(message);
  }
  out->fd_ = std::move(temp.fd);
  out->temp_path_ = temp.name;
  if (absl::Status st = out->Reserve(reserve_bytes, DirOf(display_name)); !st.ok()) return st;
  return out;
}

int CreateTemporaryIn(int dir_fd, mode_t mode, TemporaryFile* out) {
  // mkostemp's kind of name, made relative to the directory.
  constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  for (int attempt = 0; attempt < 100; attempt++) {
    std::string temp = kTempPrefix;
    for (size_t i = 0; i < kTempSuffixSize; i++) temp.push_back(kChars[random() % 62]);
    base::ScopedFd fd(
        openat(dir_fd, temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (fd.valid()) {
      flock(fd.get(), LOCK_EX | LOCK_NB);  // A new file: nobody else can hold it.
      out->fd = std::move(fd);
      out->name = std::move(temp);
      return 0;
    }
    if (errno != EEXIST) return errno;
  }
  return EEXIST;
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::CreateNew(int dir_fd,
                                                                  const std::string& name,
                                                                  const std::string& display_name,
                                                                  mode_t mode) {
  base::ScopedFd fd(
      openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) {
    const std::string message =
        base::ErrnoMessage(errno, absl::StrCat("cannot create ", display_name));
    if (errno == EEXIST) return absl::AlreadyExistsError(message);
    if (errno == ENOSPC || errno == EDQUOT) return absl::ResourceExhaustedError(message);
    return absl::UnavailableError(message);
  }
  // The umask may have narrowed `mode`; it is the agent's own setting.
  fchmod(fd.get(), mode);
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->mode_ = Mode::kStreaming;
  out->display_name_ = display_name;
  out->final_path_ = display_name;
  out->fd_ = std::move(fd);
  return out;
}

namespace {
bool IsTemporaryName(std::string_view name) {
  if (name.size() != sizeof(kTempPrefix) - 1 + kTempSuffixSize || !name.starts_with(kTempPrefix)) {
    return false;
  }
  for (char c : name.substr(sizeof(kTempPrefix) - 1)) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}
}  // namespace

RemovedTemporaries RemoveDeadTemporaryFiles(const std::string& dir) {
  RemovedTemporaries removed;
  const base::ScopedFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return removed;
  const base::DirStream d = base::OpenDirStream(dir_fd.get());
  if (d == nullptr) return removed;
  while (const dirent* e = readdir(d.get())) {
    if (!IsTemporaryName(e->d_name)) continue;
    const base::ScopedFd fd(
        openat(dir_fd.get(), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) continue;  // A symlink (ELOOP), or gone.
    struct stat st, now;
    // Ours, a plain file with no other name, and no writer holding it. An
    // empty one just made may not be locked yet by its writer: left for
    // the next clean-up.
    if (fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_nlink == 1 && (st.st_size > 0 || time(nullptr) - st.st_ctime > 60) &&
        flock(fd.get(), LOCK_EX | LOCK_NB) == 0 &&
        fstatat(dir_fd.get(), e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
        unlinkat(dir_fd.get(), e->d_name, 0) == 0) {
      removed.files++;
      removed.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return removed;
}

OutputFile::~OutputFile() {
  fd_.reset();  // Closed (and so unlocked) before its temporary file is removed.
  if (!temp_path_.empty()) {
    unlinkat(dir_fd_.valid() ? dir_fd_.get() : AT_FDCWD, temp_path_.c_str(), 0);
  }
}

absl::Status OutputFile::Write(absl::string_view bytes) {
  if (fd() < 0) return absl::FailedPreconditionError(absl::StrCat(display_name_, " is finished"));
  if (const base::IoResult r = base::WriteAll(fd(), bytes); !r.ok()) {
    const int err = r.err;
    const size_t written = r.bytes;
    if (written > 0) {
      if (is_stream_) {
        bytes_written_ += written;
        return absl::DataLossError(base::ErrnoMessage(
            err, absl::StrCat("writing ", display_name_, " (a packet was cut short)")));
      }
      // A short write left part of a packet: cut back to the last whole one.
      const off_t whole = static_cast<off_t>(bytes_written_);
      if (ftruncate(fd(), whole) != 0 || lseek(fd(), whole, SEEK_SET) < 0) {
        return absl::DataLossError(
            absl::StrCat("writing ", display_name_, ": ", std::strerror(err),
                         "; cutting it back to its last whole packet: ", std::strerror(errno)));
      }
    }
    return absl::ResourceExhaustedError(
        base::ErrnoMessage(err, absl::StrCat("writing ", display_name_)));
  }
  bytes_written_ += bytes.size();
  return absl::OkStatus();
}

absl::Status OutputFile::ShareWithGroup(gid_t gid) {
  // A .partial file of the agent's own (CreateNew) is not in place either.
  if (fd() < 0 || (temp_path_.empty() && mode_ != Mode::kStreaming)) {
    return absl::FailedPreconditionError(
        absl::StrCat(display_name_, ": only a file not yet in place can change its group"));
  }
  if (fchown(fd(), static_cast<uid_t>(-1), gid) != 0 || fchmod(fd(), 0640) != 0) {
    return absl::PermissionDeniedError(
        base::ErrnoMessage(errno, absl::StrCat("giving ", display_name_, " to group ", gid)));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Finish() {
  if (fd() < 0) return absl::FailedPreconditionError(absl::StrCat(display_name_, " is finished"));
  if (mode_ == Mode::kStreaming || is_stream_) {
    if (!is_stream_ && fsync(fd()) != 0) {
      return absl::UnavailableError(
          base::ErrnoMessage(errno, absl::StrCat("flushing ", display_name_)));
    }
    return absl::OkStatus();
  }
  // What fallocate reserved beyond the trace goes.
  if (ftruncate(fd(), static_cast<off_t>(bytes_written_)) != 0 || fsync(fd()) != 0) {
    return absl::UnavailableError(base::ErrnoMessage(errno, absl::StrCat("flushing ", temp_path_)));
  }
  fd_.reset();  // Unchecked: the fsync() above has reported any write lost.
  if (dir_fd_.valid()) return CommitInDirectory();
  // The target may have changed since Open(): still never over a non-file.
  struct stat st;
  if (lstat(final_path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const std::string kept = std::exchange(temp_path_, "");
    return absl::FailedPreconditionError(absl::StrCat("not replacing ", final_path_, ": it became ",
                                                      TypeName(st.st_mode),
                                                      " while recording; the trace is in ", kept));
  }
  if (rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    const std::string kept = std::exchange(temp_path_, "");
    return absl::UnavailableError(base::ErrnoMessage(
        errno,
        absl::StrCat("renaming ", kept, " to ", final_path_, " (the trace is in ", kept, ")")));
  }
  temp_path_.clear();
  // The rename itself survives a crash only once the directory is synced.
  const base::ScopedFd dir(open(DirOf(final_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) fsync(dir.get());
  return absl::OkStatus();
}

absl::Status OutputFile::CommitInDirectory() {
  const std::string temp = temp_path_;
  const std::string wanted = final_path_;
  const size_t dot = wanted.rfind('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? wanted : wanted.substr(0, dot);
  const std::string ext = stem.size() == wanted.size() ? "" : wanted.substr(dot);
  int err = EEXIST;
  // Something at the name meanwhile (the name is chosen before the file is
  // written): never replaced nor followed; the next free name instead.
  for (int n = 1; n < 1000 && err == EEXIST; n++) {
    final_path_ = n == 1 ? wanted : absl::StrCat(stem, "-", n, ext);
    err = renameat2(dir_fd_.get(), temp.c_str(), dir_fd_.get(), final_path_.c_str(),
                    RENAME_NOREPLACE) == 0
              ? 0
              : errno;
    // A filesystem without RENAME_NOREPLACE: a hard link is as exclusive.
    if (err == EINVAL || err == ENOSYS) {
      err = linkat(dir_fd_.get(), temp.c_str(), dir_fd_.get(), final_path_.c_str(), 0) == 0 ? 0
                                                                                            : errno;
      if (err == 0) unlinkat(dir_fd_.get(), temp.c_str(), 0);
    }
  }
  const std::string dir = DirOf(display_name_);
  if (err != 0) {
    temp_path_.clear();  // Kept: it holds the trace.
    const std::string kept = absl::StrCat(dir, "/", temp);
    return absl::UnavailableError(base::ErrnoMessage(
        err,
        absl::StrCat("renaming ", kept, " to ", display_name_, " (the trace is in ", kept, ")")));
  }
  temp_path_.clear();
  if (final_path_ != wanted) display_name_ = absl::StrCat(dir, "/", final_path_);
  fsync(dir_fd_.get());  // The rename itself survives a crash only once the directory is synced.
  return absl::OkStatus();
}

}  // namespace ringside::agent
