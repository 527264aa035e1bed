#ifndef RINGSIDE_BPF_LOAD_ERRORS_H_
#define RINGSIDE_BPF_LOAD_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::bpf {

// Why a BPF load failed, in words a user can act on: libbpf's messages
// and the kernel verifier's log are kept while EventSource loads, and a
// failure becomes one line naming the program and the verifier's reason
// (the whole log only into the file RINGSIDE_BPF_LOG names), or the missing
// privilege, or the memory limit.

// Sends libbpf's messages (all but debug) to the kept log, emptied first.
// Called before a load.
void CaptureLibbpfLog();

// The error for a load step `what` that failed with `err` (an errno),
// from the kept log: InvalidArgument with the verifier's reason when it
// refused a program; PermissionDenied naming CAP_BPF + CAP_PERFMON for
// EPERM/EACCES without a verifier log; ResourceExhausted for ENOMEM.
absl::Status LoadError(int err, const std::string& what);

// One line on a load that failed with `err` (an errno), from the kept log
// and never written anywhere: the verifier's reason when it refused a
// program (VerifierSummary), else the error and libbpf's last line.
std::string LoadFailureSummary(int err);

// The one line to tell a user why the kernel's verifier refused a program,
// from libbpf's messages `log`: "<program>: <the verifier's last reason
// line>" (the line before its "processed N insns"); "" when `log` holds no
// verifier log.
std::string VerifierSummary(absl::string_view log);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_LOAD_ERRORS_H_
