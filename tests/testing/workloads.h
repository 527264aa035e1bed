#ifndef RINGSIDE_TESTS_TESTING_WORKLOADS_H_
#define RINGSIDE_TESTS_TESTING_WORKLOADS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace ringside::testing {

// A scheduling storm: `pairs` pairs of processes passing a byte back and
// forth over pipes until killed (as `perf bench sched pipe` and hackbench
// do). Every pass is two wakeups and two context switches. Every
// kStormPassesPerPause passes one side sleeps 50 us: on this test machine's
// kernel (6.18, PREEMPT_NONE) two storms without a pause kept the kernel's
// per-CPU workers off the CPUs for up to 50 s, so that another test's
// agent hung in the kernel (a ring buffer resize, an RCU grace period)
// for minutes (issue 52, item 19); with it, under 20 ms.
inline constexpr long kStormPassesPerPause = 4096;
std::vector<pid_t> StartPipeStorm(int pairs);
// `n` children named `comm`, one after another, each killed by a SIGSEGV
// with its default action (no handler, as a crash; no core file); each
// first moves itself into the cgroup whose cgroup.procs is `cgroup_procs`,
// if given. Returns the pids of those that died of it (all `n`, unless a
// child could not crash: callers check the count). No gtest here: the
// benchmarks link this file too.
std::vector<pid_t> Crash(int n, const char* comm, const std::string& cgroup_procs = "");
// A child that moves itself into the cgroup of `cgroup_procs` (if given),
// then names itself `comm` (a task_rename event, its first recorded in that
// cgroup) and wakes every 2 ms until killed: a steady trickle of scheduling
// events. Dies with the test (PR_SET_PDEATHSIG).
pid_t StartTicker(const char* comm, const std::string& cgroup_procs = "");
// A child that sets its oom_score_adj to `oom_score_adj`, touches `mib`
// MiB of memory of its own and waits until killed; returned once its
// memory is resident (-1 if it could not start). Dies with the test
// (PR_SET_PDEATHSIG); the caller kills and reaps it.
pid_t StartMemoryHolder(size_t mib, int oom_score_adj = 0);
// `n` children named `comm` that spin on the CPU until killed, each pinned
// to CPU `cpu` when it is not -1 and first moved into the cgroup whose
// cgroup.procs is `cgroup_procs`, if given: with more of them than CPUs,
// tasks wait for a CPU (CPU pressure, run-queue delay). Die with the test
// (PR_SET_PDEATHSIG).
std::vector<pid_t> StartSpinners(int n, const char* comm, int cpu = -1,
                                 const std::string& cgroup_procs = "");
// A child named `comm`, pinned to CPU `cpu`, that sleeps `period_ms` at a
// time until killed: woken by its timer, it then waits for that CPU as
// long as others hold it. Dies with the test (PR_SET_PDEATHSIG).
pid_t StartSleeper(const char* comm, int cpu, int period_ms);
// A child named `comm` that holds itself in D (uninterruptible) for
// `hold_ms`, then exits: it waits for a vfork()-style child of its own
// (clone with CLONE_VFORK, named `child_comm`) that sleeps `hold_ms` and
// exits, as every kernel keeps a vfork parent in D until its child execs
// or exits. The caller reaps it.
pid_t HoldInD(const char* comm, const char* child_comm, int hold_ms);
// Whether the running kernel is a PREEMPT_RT one (/sys/kernel/realtime):
// there real-time spinners hold the CPU's timer and RCU threads too, which
// run at the lowest real-time priority.
bool PreemptRtKernel();
// Kills and reaps processes started by the helpers above.
void StopProcesses(const std::vector<pid_t>& pids);

// Processes the helpers above started, stopped when it goes (a failed
// ASSERT must not leave a storm running).
class ScopedProcesses {
 public:
  explicit ScopedProcesses(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  ~ScopedProcesses() { Stop(); }
  ScopedProcesses(const ScopedProcesses&) = delete;
  ScopedProcesses& operator=(const ScopedProcesses&) = delete;
  void Stop() {
    StopProcesses(pids_);
    pids_.clear();
  }
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_WORKLOADS_H_
