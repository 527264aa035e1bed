#ifndef RINGSIDE_TESTS_TESTING_WORKLOADS_H_
#define RINGSIDE_TESTS_TESTING_WORKLOADS_H_

#include <sys/types.h>

#include <vector>

namespace ringside::testing {

// A scheduling storm: `pairs` pairs of processes passing a byte back and
// forth over pipes until killed (as `perf bench sched pipe` and hackbench
// do). Every pass is two wakeups and two context switches.
std::vector<pid_t> StartPipeStorm(int pairs);
// Kills and reaps processes started by the helpers above.
void StopProcesses(const std::vector<pid_t>& pids);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_WORKLOADS_H_
