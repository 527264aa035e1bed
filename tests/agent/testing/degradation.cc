#include "tests/agent/testing/degradation.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>

namespace ringside::agent::testing {
namespace {

// A seccomp filter that fails mount() with EPERM and allows the rest.
sock_filter kDenyMount[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mount, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

}  // namespace

Degradation HideBtf() {
  Degradation d;
  d.hide_btf = true;
  return d;
}

Degradation NoTracefs() {
  Degradation d;
  d.no_tracefs = true;
  return d;
}

Degradation MemlockLimit(rlim_t bytes) {
  Degradation d;
  d.memlock_bytes = bytes;
  return d;
}

int ApplyInChild(const Degradation& d) {
  if (d.hide_btf || d.no_tracefs) {
    // Private first, so that nothing propagates to the test's namespace.
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return 101;
    }
  }
  if (d.hide_btf &&
      mount("ringside-test", "/sys/kernel/btf", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") != 0) {
    return 102;
  }
  if (d.no_tracefs) {
    for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      while (umount2(dir, MNT_DETACH) == 0) {
      }
    }
    // Where debugfs is mounted, its tracing directory mounts tracefs again
    // on first use (an automount, which seccomp does not see): hide it.
    if (access("/sys/kernel/debug", F_OK) == 0 &&
        mount("ringside-test", "/sys/kernel/debug", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") !=
            0) {
      return 103;
    }
    sock_fprog deny_mount = {static_cast<unsigned short>(std::size(kDenyMount)), kDenyMount};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &deny_mount) != 0) {
      return 103;
    }
  }
  if (d.memlock_bytes.has_value()) {
    const rlimit limit = {*d.memlock_bytes, *d.memlock_bytes};
    if (setrlimit(RLIMIT_MEMLOCK, &limit) != 0) return 104;
  }
  return 0;
}

}  // namespace ringside::agent::testing
