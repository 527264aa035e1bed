#ifndef RINGSIDE_BASE_STATUS_H_
#define RINGSIDE_BASE_STATUS_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace ringside::base {

// "`what`: <strerror(err)>", the text of every errno error ringside reports.
// For callers whose status code is their own policy (a fixed code, or a
// mapping with hints of their own).
std::string ErrnoMessage(int err, absl::string_view what);

// The error `err` stopped `what` with, under absl's canonical code for it
// (absl::ErrnoToStatusCode: ENOENT kNotFound, EACCES and EPERM
// kPermissionDenied, EEXIST kAlreadyExists, EINVAL kInvalidArgument, ENOSPC,
// EMFILE and ENFILE kResourceExhausted, EAGAIN kUnavailable, EBUSY
// kFailedPrecondition, what it does not know kUnknown), its message
// ErrnoMessage(err, what). `what` names the call and the path: "opening
// /sys/kernel/tracing/trace_marker".
// REQUIRES: err != 0.
absl::Status ErrnoToStatus(int err, absl::string_view what);

// ErrnoToStatus(errno, what): call it before anything else can change errno.
absl::Status ErrnoStatus(absl::string_view what);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_STATUS_H_
