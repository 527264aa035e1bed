#ifndef RINGSIDE_TESTS_AGENT_TESTING_DEGRADATION_H_
#define RINGSIDE_TESTS_AGENT_TESTING_DEGRADATION_H_

#include <sys/resource.h>

#include <optional>

namespace ringside::agent::testing {

// What a child running ringside (`record`, `agent`) takes away before it
// execs, so that a test sees it run on a machine missing that. Nothing of
// it reaches the test's own process or the machine: the mounts are in a
// mount namespace of the child's own.
struct Degradation {
  // An empty tmpfs over /sys/kernel/btf: the kernel's BTF is not to be found.
  bool hide_btf = false;
  // tracefs unmounted, debugfs (whose tracing directory would mount it
  // again) hidden, and mount() refused (seccomp, as a container's profile
  // does): tracefs cannot be had.
  bool no_tracefs = false;
  // RLIMIT_MEMLOCK, soft and hard.
  std::optional<rlim_t> memlock_bytes;

  bool any() const { return hide_btf || no_tracefs || memlock_bytes.has_value(); }
};

Degradation HideBtf();
Degradation NoTracefs();
Degradation MemlockLimit(rlim_t bytes);

// Applies `d` to the calling process: for the child of a fork(), between the
// fork and its exec. Async-signal-safe (system calls only), as a child of a
// threaded process must be. Returns 0, or the exit status 101-104 the child
// should _exit with (which step failed: 101 the mount namespace, 102 the
// BTF mount, 103 hiding tracefs, 104 the limit).
int ApplyInChild(const Degradation& d);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_DEGRADATION_H_
