#ifndef RINGSIDE_AGENT_SOURCES_STAGING_FLUSH_H_
#define RINGSIDE_AGENT_SOURCES_STAGING_FLUSH_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringside::agent {

// The handshake behind DataSource::FlushStaging(): a caller asks a source's
// reader thread for one read pass of the staging rings and waits for it,
// because the rings have a single reader (a second thread reading them would
// race the first over the consumer positions).
//
// Requests are numbered; the reader serves every request made before it
// began its pass, so concurrent callers share one pass. A request is urgent
// (a snapshot waits for it: it wakes the reader and cuts a CPU budget's
// pause short) or in the background (the buffer owner's, for the durable
// store: served by the reader's next pass, whenever its pace brings it). Closed until Open()
// (the reader thread runs) and again from Close() (the source is stopping):
// callers then return at once; Stop() reads the rest itself.
//
// Thread-safe.
class StagingFlush {
 public:
  // Caller: registers a request, calls `wake` to rouse the reader, and
  // returns the request's number; 0 (and no call) when closed. `wake` runs
  // under the lock Close() takes, so it never touches what Stop() releases
  // after Close() (the wake eventfd).
  uint64_t Request(absl::FunctionRef<void()> wake) {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    wake();
    urgent_ = ++requested_;
    return requested_;
  }
  // Caller: registers a background request and returns its number; 0 when
  // closed. Neither wakes the reader nor counts as urgent.
  // `now_ns`: when it is made (CLOCK_BOOTTIME), for PendingBefore().
  uint64_t RequestInBackground(uint64_t now_ns) {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    background_at_ns_ = now_ns;
    return ++requested_;
  }
  // Caller: request `n` is served (never, once closed before it was).
  bool IsServed(uint64_t n) {
    absl::MutexLock lock(&mu_);
    return served_ >= n;
  }
  // Caller: waits until request `n` is served, the flush is closed, or
  // `deadline`. True only when served.
  bool Await(uint64_t n, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto settled = [this, n]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return served_ >= n || closed_; };
    mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
    return served_ >= n;
  }
  // Reader: the newest request not yet served (0: none). A pass that starts
  // after this call covers it: call Served() with it when the pass is done.
  uint64_t Pending() {
    absl::MutexLock lock(&mu_);
    return requested_ > served_ ? requested_ : 0;
  }
  // Reader: what a pass that serves Pending() must read, as a time: every
  // record made before it (CLOCK_BOOTTIME). A background request needs
  // only what came before it was made (the durable store pins what ended
  // before then); an urgent one waiting asks for everything (UINT64_MAX).
  uint64_t PendingBefore() {
    absl::MutexLock lock(&mu_);
    return urgent_ > served_ ? UINT64_MAX : background_at_ns_;
  }
  // Reader: an urgent request waits (a CPU budget's pause ends for it).
  bool UrgentPending() {
    absl::MutexLock lock(&mu_);
    return urgent_ > served_;
  }
  void Served(uint64_t n) {
    absl::MutexLock lock(&mu_);
    if (n > served_) served_ = n;
  }
  // The reader thread runs from now on.
  void Open() {
    absl::MutexLock lock(&mu_);
    closed_ = false;
  }
  // Stopping: releases every waiter and refuses new requests.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

 private:
  absl::Mutex mu_;
  uint64_t requested_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t urgent_ ABSL_GUARDED_BY(mu_) = 0;  // The newest urgent request.
  uint64_t served_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t background_at_ns_ ABSL_GUARDED_BY(mu_) = 0;  // The newest background request's.
  bool closed_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_STAGING_FLUSH_H_
