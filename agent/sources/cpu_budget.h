#ifndef RINGSIDE_AGENT_SOURCES_CPU_BUDGET_H_
#define RINGSIDE_AGENT_SOURCES_CPU_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringside::agent {

// The CPU the consumer threads of one recording (the BPF ring reader, the
// ftrace readers) may use together, as a percent of one CPU
// (`max_consumer_cpu_percent`). Past it they pause: the staging rings fill
// and the kernel counts what it cannot put in them (BPF reserve failures,
// ftrace overruns), which the trace reports, rather than the agent taking
// more of a machine in trouble.
//
// A leaky bucket: each thread charges the CPU time it used since its last
// charge; the bucket drains at `percent` of wall time. Up to `burst` worth
// of budget may be spent at once, so a short spike after a quiet spell is
// read at full speed. Thread-safe.
class CpuBudget {
 public:
  // `now` is for tests; it defaults to absl::Now.
  CpuBudget(uint32_t percent, absl::Duration burst = absl::Milliseconds(500),
            std::function<absl::Time()> now = nullptr);

  // Adds `cpu_used` and returns how long the caller should pause before it
  // reads again (zero while within budget).
  absl::Duration Charge(absl::Duration cpu_used);

  struct Stats {
    uint32_t percent = 0;
    absl::Duration cpu_charged;  // CPU the consumers used, as charged.
    absl::Duration paused;       // Pauses asked of them, summed over threads.
    uint64_t pauses = 0;
  };
  Stats stats() const;
  uint32_t percent() const { return percent_; }

  // The CPU time a thread used since the meter was made or last read
  // (CLOCK_THREAD_CPUTIME_ID): construct it on the thread that reads it.
  class ThreadMeter {
   public:
    ThreadMeter();
    absl::Duration TakeUsed();

   private:
    absl::Duration last_;
  };

 private:
  const uint32_t percent_;
  const absl::Duration allowance_;  // CPU that may be spent at once.
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  absl::Duration debt_ ABSL_GUARDED_BY(mu_);
  absl::Time last_drain_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// One consumer thread's side of the budget: after each pass over its rings
// the thread charges what it used and pauses as long as the budget says.
// Without a budget it only measures. The totals are read from any thread.
class ConsumerPacer {
 public:
  explicit ConsumerPacer(CpuBudget* budget) : budget_(budget) {}

  // On the consumer thread, after each pass. A pause is cut short (within
  // 10 ms) once `stop` is set, or `cut_short` (if given) returns true: a
  // snapshot waiting for the staging rings to be read is served at once,
  // its CPU charged at the next pass, rather than cloned without them.
  void AfterPass(const std::atomic<bool>& stop, const std::function<bool()>& cut_short = nullptr);

  absl::Duration cpu() const { return absl::Nanoseconds(cpu_ns_.load(std::memory_order_relaxed)); }
  absl::Duration paused() const {
    return absl::Nanoseconds(paused_ns_.load(std::memory_order_relaxed));
  }
  uint64_t pauses() const { return pauses_.load(std::memory_order_relaxed); }

 private:
  CpuBudget* const budget_;
  std::optional<CpuBudget::ThreadMeter> meter_;  // Made on the consumer thread.
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<int64_t> paused_ns_{0};
  std::atomic<uint64_t> pauses_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_CPU_BUDGET_H_
