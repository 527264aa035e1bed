#ifndef RINGSIDE_TESTS_AGENT_TESTING_OPEN_GATE_H_
#define RINGSIDE_TESTS_AGENT_TESTING_OPEN_GATE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringside::agent::testing {

// A slow disk, made deterministic: holds the first open(2) of a file in
// `dir` by process `pid` until the test releases it, the way an on-access
// scanner (anti-virus, HSM) holds opens, through fanotify permission events
// (FAN_OPEN_PERM on the directory, its files only). Every other open in the
// directory, by anyone, is allowed at once. The process that opens sees
// nothing but a slow open(2), and then success or EPERM.
//
// Thread-safety: all methods from the test's thread; a thread of its own
// answers the kernel.
class OpenGate {
 public:
  // Errors: the fanotify calls' (kPermissionDenied without CAP_SYS_ADMIN).
  static absl::StatusOr<std::unique_ptr<OpenGate>> Create(const std::string& dir, pid_t pid);
  // Allows what is still held, then stops answering (the kernel allows
  // every open once the group is closed).
  ~OpenGate();
  OpenGate(const OpenGate&) = delete;
  OpenGate& operator=(const OpenGate&) = delete;

  // Waits until an open by `pid` is held; the path of the file it opens.
  // kDeadlineExceeded when none came within `timeout`.
  absl::StatusOr<std::string> WaitHeld(absl::Duration timeout);
  // Lets the held open go on, or fail with EPERM. Once only; later opens by
  // `pid` are allowed at once.
  void Release(bool allow);

 private:
  OpenGate(int fanotify_fd, int stop_fd, pid_t pid);
  void Serve();

  const int fanotify_fd_;
  const int stop_fd_;  // eventfd: the destructor stops Serve().
  const pid_t pid_;
  absl::Mutex mu_;
  int held_fd_ ABSL_GUARDED_BY(mu_) = -1;  // The held event's file; -1 when none.
  bool was_held_ ABSL_GUARDED_BY(mu_) = false;
  std::string held_path_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_OPEN_GATE_H_
