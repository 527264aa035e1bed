#include "tests/testing/workloads.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace ringside::testing {

std::vector<pid_t> StartPipeStorm(int pairs) {
  std::vector<pid_t> pids;
  for (int i = 0; i < pairs; i++) {
    int ab[2], ba[2];
    if (pipe(ab) != 0) break;
    if (pipe(ba) != 0) {
      close(ab[0]);
      close(ab[1]);
      break;
    }
    for (int side = 0; side < 2; side++) {
      const pid_t pid = fork();
      if (pid == 0) {
        // Never outlives the test binary, whatever a failed test skipped.
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        const int in = side == 0 ? ba[0] : ab[0];
        const int out = side == 0 ? ab[1] : ba[1];
        char c = 0;
        if (side == 0 && write(out, &c, 1) != 1) _exit(1);
        for (long pass = 1; read(in, &c, 1) == 1 && write(out, &c, 1) == 1; pass++) {
          if (side == 0 && pass % kStormPassesPerPause == 0) {
            const timespec pause{0, 50'000};
            nanosleep(&pause, nullptr);
          }
        }
        _exit(0);
      }
      if (pid > 0) pids.push_back(pid);
    }
    for (int fd : {ab[0], ab[1], ba[0], ba[1]}) close(fd);
  }
  return pids;
}

namespace {

// In a child: moves it into the cgroup of `cgroup_procs`; exits if it cannot.
void JoinCgroupOrExit(const std::string& cgroup_procs) {
  if (cgroup_procs.empty()) return;
  const int fd = open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0", 1) != 1) _exit(3);
  close(fd);
}

}  // namespace

std::vector<pid_t> Crash(int n, const char* comm, const std::string& cgroup_procs) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; i++) {
    const pid_t pid = fork();
    if (pid == 0) {
      JoinCgroupOrExit(cgroup_procs);
      prctl(PR_SET_NAME, comm, 0, 0, 0);
      const struct rlimit no_core = {0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      signal(SIGSEGV, SIG_DFL);  // A sanitizer's handler would catch it.
      raise(SIGSEGV);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) pids.push_back(pid);
  }
  return pids;
}

pid_t StartTicker(const char* comm, const std::string& cgroup_procs) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    JoinCgroupOrExit(cgroup_procs);
    prctl(PR_SET_NAME, comm, 0, 0, 0);
    const struct timespec two_ms = {0, 2'000'000};
    for (;;) nanosleep(&two_ms, nullptr);
  }
  return pid;
}

pid_t StartMemoryHolder(size_t mib, int oom_score_adj) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    close(ready[0]);
    if (FILE* adj = std::fopen("/proc/self/oom_score_adj", "w")) {
      std::fprintf(adj, "%d", oom_score_adj);
      std::fclose(adj);
    }
    const size_t bytes = mib << 20;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) std::memset(p, 1, bytes);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  const bool started = pid > 0 && read(ready[0], &c, 1) == 1;
  close(ready[0]);
  if (pid > 0 && !started) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return started ? pid : -1;
}

std::vector<pid_t> StartSpinners(int n, const char* comm, int cpu,
                                 const std::string& cgroup_procs) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; i++) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      JoinCgroupOrExit(cgroup_procs);
      prctl(PR_SET_NAME, comm, 0, 0, 0);
      if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) _exit(1);
      }
      volatile uint64_t spins = 0;
      for (;;) {
        const uint64_t next = spins + 1;
        spins = next;
      }
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

pid_t StartSleeper(const char* comm, int cpu, int period_ms) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, comm, 0, 0, 0);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) _exit(1);
    const struct timespec period = {period_ms / 1000, (period_ms % 1000) * 1'000'000L};
    for (;;) nanosleep(&period, nullptr);
  }
  return pid;
}

namespace {

struct HeldChild {
  const char* comm;
  int hold_ms;
};

// The vfork child: shares its parent's memory (and runs on a stack of its
// own), so it only sleeps and exits.
int SleepThenExit(void* arg) {
  const HeldChild& c = *static_cast<const HeldChild*>(arg);
  prctl(PR_SET_NAME, c.comm, 0, 0, 0);
  const struct timespec hold = {c.hold_ms / 1000, (c.hold_ms % 1000) * 1'000'000L};
  nanosleep(&hold, nullptr);
  _exit(0);
}

}  // namespace

pid_t HoldInD(const char* comm, const char* child_comm, int hold_ms) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, comm, 0, 0, 0);
    static char stack[64 * 1024] __attribute__((aligned(16)));
    HeldChild child{child_comm, hold_ms};
    const pid_t kid =
        clone(SleepThenExit, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
    if (kid < 0) _exit(1);
    waitpid(kid, nullptr, 0);
    _exit(0);
  }
  return pid;
}

bool PreemptRtKernel() {
  FILE* f = fopen("/sys/kernel/realtime", "r");
  if (f == nullptr) return false;
  const int c = fgetc(f);
  fclose(f);
  return c == '1';
}

void StopProcesses(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

}  // namespace ringside::testing
