#include "bpf/btf_file.h"

#include <bpf/btf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"

namespace ringside::bpf {
namespace {

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bpf_config.btf_path ", path, ": ", why));
}

// Why `st`, of `shown` (a directory on the path, or "the file"), is not
// one only root can change; "" when it is.
std::string NotRootOnly(const struct stat& st, const std::string& shown) {
  if (st.st_uid != 0) return absl::StrCat(shown, " is owned by uid ", st.st_uid, ", not root");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::StrFormat("%s is writable by %s (mode %04o), not only by root", shown,
                           (st.st_mode & S_IWOTH) != 0 ? "others" : "its group",
                           st.st_mode & 07777);
  }
  return "";
}

// Why openat(dir, name, O_NOFOLLOW...) failed with `err`, `shown` being
// the path up to `name` (or "the file").
std::string OpenFailure(int dir, const std::string& name, const std::string& shown, bool last,
                        int err) {
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return absl::StrCat(shown,
                        " is a symbolic link, which ringside does not follow here: give the "
                        "path of what it points to");
  }
  if (err == ENOENT) return last ? "no such file" : absl::StrCat(shown, ": no such directory");
  if (err == ENOTDIR) return absl::StrCat(shown, " is not a directory");
  return absl::StrCat(shown, ": ", std::strerror(err));
}

// A memfd nobody else has.
absl::StatusOr<int> NewMemfd(const std::string& path) {
  const int fd = memfd_create("ringside-btf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "bpf_config.btf_path ", path,
        ": cannot make a private copy of its BTF (memfd_create): ", std::strerror(errno)));
  }
  return fd;
}

// From now on the memfd's bytes cannot change.
bool Seal(int fd) {
  return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0;
}

std::string ProcPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// Opens `path` as described in the header: the file's fd, or why not.
absl::StatusOr<int> OpenRootOnly(const std::string& path) {
  if (path.empty() || path[0] != '/') return Refuse(path, "not an absolute path");
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.empty()) return Refuse(path, "names a directory, not a file");
  base::ScopedFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Refuse(path, absl::StrCat("/: ", std::strerror(errno)));
  std::string shown = "/";
  struct stat st;
  for (size_t i = 0;; i++) {
    if (fstat(dir.get(), &st) != 0) return Refuse(path, absl::StrCat(shown, ": ", strerror(errno)));
    if (std::string why = NotRootOnly(st, shown); !why.empty()) return Refuse(path, why);
    const std::string& name = parts[i];
    const std::string next_shown = absl::StrCat(shown == "/" ? "" : shown, "/", name);
    const bool last = i + 1 == parts.size();
    // The file is first only looked at (O_PATH): opening a device node or
    // a FIFO named by mistake for reading could have effects of its own.
    const int flags =
        last ? O_PATH | O_NOFOLLOW | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    const int fd = openat(dir.get(), name.c_str(), flags);
    if (fd < 0) {
      return Refuse(path,
                    OpenFailure(dir.get(), name, last ? "the file" : next_shown, last, errno));
    }
    if (last) {
      base::ScopedFd looked_at(fd);
      // O_PATH with O_NOFOLLOW opens a symbolic link itself.
      if (fstat(fd, &st) != 0) return Refuse(path, strerror(errno));
      if (S_ISLNK(st.st_mode))
        return Refuse(path, OpenFailure(dir.get(), name, "the file", true, ELOOP));
      if (!S_ISREG(st.st_mode)) return Refuse(path, "not a regular file");
      if (std::string why = NotRootOnly(st, "the file"); !why.empty()) return Refuse(path, why);
      if (static_cast<uint64_t>(st.st_size) > BtfFile::kMaxFileBytes) {
        return Refuse(path, absl::StrCat("larger than ", BtfFile::kMaxFileBytes >> 20,
                                         " MiB: not a kernel's BTF"));
      }
      // The directory is root's alone, so the name still holds what was
      // checked; the inode is compared all the same.
      base::ScopedFd file(
          openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      struct stat opened;
      if (file.get() < 0) {
        return Refuse(path, OpenFailure(dir.get(), name, "the file", true, errno));
      }
      if (fstat(file.get(), &opened) != 0 || opened.st_dev != st.st_dev ||
          opened.st_ino != st.st_ino) {
        return Refuse(path, "the file changed while it was opened");
      }
      return file.release();
    }
    dir.reset(fd);
    shown = next_shown;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<BtfFile>> BtfFile::Open(const std::string& path) {
  absl::StatusOr<int> fd = OpenRootOnly(path);
  if (!fd.ok()) return fd.status();
  base::ScopedFd file(*fd);
  // The file is read once, here, through the descriptor checked above (only
  // root can change it: it and its directories are root's alone);
  // everything after reads the sealed copy of its BTF. libbpf parses files
  // by path only, hence /proc/self/fd.
  const std::string whole_path = ProcPath(file.get());
  if (access(whole_path.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("bpf_config.btf_path ", path, ": cannot read it at ", whole_path,
                     " (is /proc mounted?): libbpf reads the BTF by path"));
  }
  std::unique_ptr<BtfFile> out(new BtfFile());
  out->path_ = path;
  // Raw BTF or an ELF with a .BTF section: libbpf tells them apart.
  out->parsed_ = btf__parse(whole_path.c_str(), nullptr);
  if (out->parsed_ == nullptr) {
    return Refuse(path,
                  "not a kernel's BTF (a raw .btf file, or an ELF with a .BTF section, that "
                  "describes struct task_struct)");
  }
  if (btf__endianness(out->parsed_) !=
      (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? BTF_LITTLE_ENDIAN : BTF_BIG_ENDIAN)) {
    return Refuse(path, "BTF in the other byte order: not this machine's kernel's");
  }
  if (btf__find_by_name_kind(out->parsed_, "task_struct", BTF_KIND_STRUCT) <= 0) {
    return Refuse(path,
                  "not a kernel's BTF (a raw .btf file, or an ELF with a .BTF section, that "
                  "describes struct task_struct)");
  }
  // The loader reads each tracepoint's arguments from its btf_trace_*
  // type, which a minimised BTF (bpftool gen min_core_btf) leaves out.
  if (btf__find_by_name_kind(out->parsed_, "btf_trace_sched_switch", BTF_KIND_TYPEDEF) <= 0) {
    return Refuse(path,
                  "has no tracepoint types (btf_trace_sched_switch): a minimised BTF, not the "
                  "kernel's whole one");
  }
  // libbpf's copy: the raw BTF alone, whatever the file was.
  const absl::string_view raw = out->raw();
  if (raw.empty()) return Refuse(path, "libbpf gave no raw BTF for it");
  absl::StatusOr<int> memfd = NewMemfd(path);
  if (!memfd.ok()) return memfd.status();
  base::ScopedFd copy(*memfd);
  const base::IoResult written = base::WriteAll(copy.get(), raw);
  if (!written.ok() || !Seal(copy.get())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("bpf_config.btf_path ", path,
                     ": copying its BTF: ", std::strerror(written.ok() ? errno : written.err)));
  }
  out->copy_fd_ = std::move(copy);
  out->copy_path_ = ProcPath(out->copy_fd_.get());
  return out;
}

BtfFile::~BtfFile() { btf__free(parsed_); }

absl::string_view BtfFile::raw() const {
  uint32_t size = 0;
  const void* data = btf__raw_data(parsed_, &size);
  return data == nullptr ? absl::string_view()
                         : absl::string_view(static_cast<const char*>(data), size);
}

}  // namespace ringside::bpf
