#ifndef RINGSIDE_TESTS_TESTING_PERF_TRACEPOINT_COUNTER_H_
#define RINGSIDE_TESTS_TESTING_PERF_TRACEPOINT_COUNTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::testing {

// The kernel's own count of a tracepoint: a system-wide perf_event_open
// counter per online CPU, with a filter like those of `perf stat --filter`
// (the tracepoint's format fields; "" for none). Counts what the tracepoint
// fires on each CPU between Enable() and Disable(); see the accounting
// tests for where the kernel's count is not exact (switches out of idle).
class PerfTracepointCounter {
 public:
  PerfTracepointCounter() = default;
  ~PerfTracepointCounter();
  PerfTracepointCounter(const PerfTracepointCounter&) = delete;
  PerfTracepointCounter& operator=(const PerfTracepointCounter&) = delete;

  // `event`: "group/name" ("sched/sched_switch"). Needs tracefs (for the
  // tracepoint's id) and CAP_PERFMON.
  absl::Status Open(absl::string_view event, const std::string& filter);
  void Enable();
  void Disable();
  // Per CPU (index: CPU number), and summed.
  std::vector<int64_t> CountPerCpu() const;
  int64_t Count() const;

 private:
  std::vector<int> fds_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PERF_TRACEPOINT_COUNTER_H_
