#ifndef RINGSIDE_AGENT_LIFECYCLE_PRIVILEGES_H_
#define RINGSIDE_AGENT_LIFECYCLE_PRIVILEGES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// A set of Linux capabilities, bit N for capability N (capabilities(7)).
using CapabilityMask = uint64_t;

constexpr CapabilityMask CapabilityBit(int capability) { return CapabilityMask{1} << capability; }

// The capabilities a running agent still needs once its programs are
// loaded and attached and tracefs is open:
//  - CAP_CHOWN when output files go to a configured group (`output_group`)
//    the agent is not a member of: each new file and directory is chowned.
//  - CAP_BPF on kernels where unprivileged_bpf_disabled gates every bpf()
//    command (before 6.5), not only loading: the drop counters are read
//    with a map lookup while recording.
// Everything else the agent does after setup (reading its rings and tracefs
// files, /proc, writing files it owns as root) needs no capability.
struct KeptCapabilities {
  bool output_group = false;
  // uname's release, e.g. "6.1.0-13-amd64", and
  // /proc/sys/kernel/unprivileged_bpf_disabled (0 when unreadable).
  std::string kernel_release;
  int unprivileged_bpf_disabled = 0;
};
CapabilityMask CapabilitiesToKeep(const KeptCapabilities& needs);
// The same, for this machine.
CapabilityMask CapabilitiesToKeepHere(bool output_group);

// Lowers every thread of this process to `keep` (intersected with what each
// thread has): effective and permitted sets to `keep`, inheritable and
// ambient sets emptied, the bounding set reduced to `keep` where the thread
// may (CAP_SETPCAP), and no_new_privs set, so neither this process nor
// anything it runs can gain a capability again. Capabilities belong to
// threads, so the threads already running are each asked to drop their own
// (a real-time signal, as glibc does for setuid) and the result is checked
// in /proc/self/task. A thread that holds the signal back for 2 s in a row
// fails the drop; one in an uninterruptible wait (a slow fsync) is waited
// for up to 60 s. Fails, naming the thread, when any thread is left with
// more than `keep`.
absl::Status DropCapabilities(CapabilityMask keep);

// True when a thread's status text (/proc/self/task/TID/status) shows
// `signal_number` both blocked (SigBlk) and pending for the thread (SigPnd):
// sent, and held back. A thread running the signal's handler blocks it as
// well, but it is no longer pending there.
bool HoldsSignalBack(absl::string_view status_text, int signal_number);

// What /proc/<pid>/task/<tid>/status says of one thread.
struct ThreadCapabilities {
  pid_t tid = 0;
  CapabilityMask effective = 0;
  CapabilityMask permitted = 0;
  CapabilityMask inheritable = 0;
  CapabilityMask ambient = 0;
  CapabilityMask bounding = 0;
  bool no_new_privs = false;
};
absl::StatusOr<ThreadCapabilities> ParseThreadStatus(const std::string& status_text);
// Every thread of `pid` (0: this process).
absl::StatusOr<std::vector<ThreadCapabilities>> ReadThreadCapabilities(pid_t pid);

// "none", or the names joined: "CAP_BPF,CAP_CHOWN".
std::string CapabilityNames(CapabilityMask mask);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_LIFECYCLE_PRIVILEGES_H_
