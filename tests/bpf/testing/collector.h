#ifndef RINGSIDE_TESTS_BPF_TESTING_COLLECTOR_H_
#define RINGSIDE_TESTS_BPF_TESTING_COLLECTOR_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bpf/event_source.h"
#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/sched_events.h"

namespace ringside::bpf::testing {

// Every record an EventSource hands out, copied and sorted by type, with
// the checks every consumer relies on done as they arrive: sizes match the
// type, the header's CPU is the ring's, and sched_switch records of a CPU
// come in time order.
struct Collected {
  std::vector<rs_sched_switch> switches;
  std::vector<rs_sched_wakeup> wakeups, wakeups_new;
  std::vector<rs_sched_migrate> migrations;
  std::vector<rs_process_fork> forks;
  std::vector<rs_process_exec> execs;
  std::vector<rs_process_exit> exits;
  std::vector<rs_task_rename> renames;
  std::vector<rs_process_free> frees;
  std::vector<rs_oom_kill> ooms;
  std::vector<rs_fatal_signal> signals;
  std::vector<rs_core_dump> core_dumps;
  uint64_t total = 0;
  std::vector<std::string> errors;  // Broken expectations, for the test to report.

  void Add(uint32_t cpu, const void* data, size_t size);

 private:
  std::vector<uint64_t> last_switch_ts_;
};

// Polls `source` until `child` exits, then drains what is left.
void CollectUntilExit(EventSource* source, pid_t child, Collected* out, int* status = nullptr);

// Loads a source or, where BPF is truly missing here, returns null with the
// reason (the caller skips); other failures are test failures.
std::unique_ptr<EventSource> LoadOrSkipReason(const EventSource::Options& options,
                                              std::string* skip);

// The BPF programs and maps loaded in the system: {"prog"|"map", id} -> name.
std::map<std::pair<std::string, uint32_t>, std::string> LoadedBpfObjects();

std::string Comm(const char (&comm)[RS_TASK_COMM_LEN]);

}  // namespace ringside::bpf::testing

// Skips the test naming what is missing when BPF cannot be loaded here.
#define RINGSIDE_LOAD_BPF_OR_SKIP(var, options)                           \
  std::string var##_skip;                                                 \
  std::unique_ptr<::ringside::bpf::EventSource> var =                     \
      ::ringside::bpf::testing::LoadOrSkipReason((options), &var##_skip); \
  if (!var) {                                                             \
    if (::testing::Test::HasFailure()) return;                            \
    GTEST_SKIP() << "needs BPF: " << var##_skip;                          \
  }

#endif  // RINGSIDE_TESTS_BPF_TESTING_COLLECTOR_H_
