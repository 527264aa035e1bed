#ifndef RINGSIDE_AGENT_SOURCES_DRAIN_WAIT_H_
#define RINGSIDE_AGENT_SOURCES_DRAIN_WAIT_H_

#include <algorithm>
#include <cstdint>

namespace ringside::agent {

// How long a staging reader (BpfDataSource's, FtraceDataSource's) waits
// for its rings before its next pass: long enough that a pass reads about
// kRecordsPerPass records, from drain_period_ms up to kMaxWaitMs
// (drain_period_ms if longer).
//
// Why: a pass costs a fixed ~80 us beside its records (the wakeup, the
// flush of the CPUs' BPF batches, the rings' headers), so on a quiet
// machine, where a pass every 100 ms reads a hundred records, the fixed part
// was most of the agent's CPU: 0.8 ms a second for the BPF reader on a
// 2-CPU VM, idle, and 0.34 for the ftrace reader (issue 57). A busy ring
// needs no timer: the kernel wakes the reader once a BPF ring is a quarter
// full (an ftrace buffer at drain_buffer_percent), and BPF's incident
// records wake it at once (rs_submit_now); a snapshot's staging flush
// wakes it too. What waits longer is only quiet data on its way into the
// central buffer, at most about a second, the buffer owner's own flush
// period.
//
// Not thread-safe: the reader's.
class DrainWait {
 public:
  static constexpr uint64_t kRecordsPerPass = 4096;
  static constexpr uint32_t kMaxWaitMs = 1000;

  // `now_ns`: the time of the first pass's start (any one clock for all).
  DrainWait(uint32_t period_ms, int64_t now_ns)
      : min_ms_(std::max<uint32_t>(period_ms, 1)),
        max_ms_(std::max(min_ms_, kMaxWaitMs)),
        wait_ms_(min_ms_),
        last_pass_ns_(now_ns) {}

  // The wait before the next pass, in milliseconds.
  uint32_t next_ms() const { return wait_ms_; }

  // next_ms(), or less when the wait must end by `deadline_ns` (other work
  // of the reader's loop that is due then); at least 1.
  int TimeoutMs(int64_t now_ns, int64_t deadline_ns) const {
    const int64_t until_ms = (std::max(deadline_ns, now_ns) - now_ns) / 1'000'000;
    return static_cast<int>(std::max<int64_t>(std::min<int64_t>(wait_ms_, until_ms), 1));
  }

  // After a pass that read `records`, ending at `now_ns`: the wait at which
  // the rate since the pass before fills a pass, within the bounds.
  void AfterPass(uint64_t records, int64_t now_ns) {
    const uint64_t elapsed_ms =
        static_cast<uint64_t>(std::max<int64_t>(now_ns - last_pass_ns_, 1'000'000)) / 1'000'000;
    last_pass_ns_ = now_ns;
    if (records == 0) {
      wait_ms_ = max_ms_;
      return;
    }
    const uint64_t ms = kRecordsPerPass * elapsed_ms / records;
    wait_ms_ = static_cast<uint32_t>(std::clamp<uint64_t>(ms, min_ms_, max_ms_));
  }

 private:
  uint32_t min_ms_;
  uint32_t max_ms_;
  uint32_t wait_ms_;
  int64_t last_pass_ns_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_DRAIN_WAIT_H_
