#ifndef RINGSIDE_BPF_BTF_FILE_H_
#define RINGSIDE_BPF_BTF_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"

struct btf;

namespace ringside::bpf {

// The kernel's BTF from bpf_config.btf_path, read once. ringside runs as
// root and relocates its programs against these types, so the file is
// trusted only as far as root's own files are:
//  - opened one path component at a time with O_NOFOLLOW, from "/": no
//    symbolic link is followed anywhere on the path;
//  - every directory on the path and the file itself owned by root and not
//    writable by group or others, the file a regular one;
//  - the file looked at (O_PATH) before it is opened for reading, so that
//    a device node or FIFO named by mistake is never opened;
//  - read and parsed once, through the descriptor checked (by its
//    /proc/self/fd path: only root can change it), and its raw BTF copied
//    into a sealed memfd that nobody can change or replace. The file is not
//    copied whole: a debug vmlinux is gigabytes, its BTF a few MiB.
// libbpf (1.1 on Debian 12) takes the BTF for CO-RE only as a path
// (bpf_object_open_opts.btf_custom_path, parsed again at each object's
// load), so it is handed the memfd's /proc/self/fd/N: the BTF we checked,
// not the file, with nothing left on disk if the agent dies. An ELF's .BTF
// section is copied out as raw BTF, so libbpf does not walk the ELF again.
//
// Immutable once opened; the memfd closes with it.
class BtfFile {
 public:
  // Largest file read: a kernel's debug vmlinux with its .BTF section.
  static constexpr size_t kMaxFileBytes = size_t{1} << 30;

  // Checks, reads and parses `path`. kInvalidArgument names the path and
  // the problem: not absolute, a symbolic link, a component or the file not
  // root's or writable by others, not a regular file, missing, too large,
  // not BTF, or a BTF that is no whole kernel's (no struct task_struct, no
  // btf_trace_* tracepoint types, as a minimised BTF lacks).
  // kFailedPrecondition when /proc is not mounted; kResourceExhausted when
  // the copy cannot be made (memfd_create, memory).
  static absl::StatusOr<std::unique_ptr<BtfFile>> Open(const std::string& path);
  ~BtfFile();
  BtfFile(const BtfFile&) = delete;
  BtfFile& operator=(const BtfFile&) = delete;

  // The path given (for messages).
  const std::string& path() const { return path_; }
  // The sealed copy, for libbpf: "/proc/self/fd/N", valid while this lives.
  const std::string& copy_path() const { return copy_path_; }
  // The raw BTF (header, types, strings), in this machine's byte order.
  absl::string_view raw() const;

 private:
  BtfFile() = default;

  std::string path_;
  base::ScopedFd copy_fd_;  // The sealed memfd.
  std::string copy_path_;
  struct btf* parsed_ = nullptr;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_BTF_FILE_H_
