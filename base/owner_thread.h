#ifndef RINGSIDE_BASE_OWNER_THREAD_H_
#define RINGSIDE_BASE_OWNER_THREAD_H_

#include <atomic>
#include <thread>

namespace ringside::base {

// Marks state that belongs to one thread at a time: no lock guards it, and
// the thread that owns it is the only one that touches it
// (docs/design/threading.md, "State that belongs to one thread"). Check()
// at each entry point of that state says so in the code and holds it to it
// in every build: a use from another thread would be a data race that no
// test here is sure to catch (there is no ThreadSanitizer build), so the
// process stops at once, naming the state and both threads, instead of
// writing a recording from torn state.
//
// Ownership moves at the points the threading page names: a reader thread
// Claim()s its source's state first thing, and the thread that joined it
// Claim()s it back after the join (which orders everything the reader did
// before it). State nobody has claimed is claimed by its first Check().
//
// Cost: a thread-id read and compare; call it once per pass or request,
// not per event.
class OwnerThread {
 public:
  // `what` names the state in the failure message; a string literal.
  explicit OwnerThread(const char* what) : what_(what) {}
  OwnerThread(const OwnerThread&) = delete;
  OwnerThread& operator=(const OwnerThread&) = delete;

  // The calling thread owns the state from now on.
  void Claim() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }

  // Returns if the calling thread owns the state (or claims it, when no
  // thread does yet); otherwise aborts with a message on stderr.
  void Check() {
    const std::thread::id me = std::this_thread::get_id();
    std::thread::id owner = owner_.load(std::memory_order_relaxed);
    if (owner == me) return;
    if (owner == std::thread::id() && owner_.compare_exchange_strong(owner, me)) return;
    Fail(me, owner);
  }

 private:
  [[noreturn]] void Fail(std::thread::id me, std::thread::id owner) const;

  const char* what_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_OWNER_THREAD_H_
