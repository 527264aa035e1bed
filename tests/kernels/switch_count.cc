// The kernel matrix's accounting workload (tests/kernels/init.sh): two tasks
// named rskt-pp ping-pong ROUNDS times over pipes, both pinned to CPU, then
// leave the CPU in each other way a task can (a sleep, a vfork's wait, a
// preemption while both spin, their exit), while a perf counter on every
// CPU counts the kernel's own sched_switch hits whose next task is one of
// them. Prints one line:
//   t0_ns=.. t1_ns=.. cpuN=COUNT... total=COUNT
// t0 and t1 (CLOCK_BOOTTIME, the clock of ringside's timestamps) enclose the
// counted window, and nothing happens to the tasks between either end and
// the counters: they sleep on a pipe from before t0 (read before the
// counters start), and t1 is read after the counters stop, 100 ms after the
// last of them was reaped (a reaped task can still be switched in once, to
// switch out for good: on PREEMPT_RT that came after its parent's waitpid).
// So the switches into them in [t0, t1] are exactly those counted. The
// host compares the switches ringside kept in that window.
//
// Static (g++ -static), for an initramfs with busybox only. Usage:
//   kt-switches ROUNDS CPU
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

constexpr char kName[] = "rskt-pp";
constexpr int kMaxCpus = 64;

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "kt-switches: %s: %s\n", what, strerror(errno));
  exit(1);
}

long long BootNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int TracepointId() {
  FILE* f = fopen("/sys/kernel/tracing/events/sched/sched_switch/id", "r");
  if (f == nullptr) Die("/sys/kernel/tracing/events/sched/sched_switch/id");
  int id = -1;
  if (fscanf(f, "%d", &id) != 1) Die("reading the tracepoint id");
  fclose(f);
  return id;
}

// One side of the ping-pong: reads a byte from `in`, writes one to `out`.
[[noreturn]] void Player(int cpu, int rounds, bool serves, int ready, int go, int in, int out) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Die("sched_setaffinity");
  prctl(PR_SET_NAME, kName);
  char c = 0;
  if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 1) Die("start");
  for (int i = 0; i < rounds; i++) {
    if (serves && write(out, &c, 1) != 1) Die("write");
    if (read(in, &c, 1) != 1) Die("read");
    if (!serves && write(out, &c, 1) != 1) Die("write");
  }
  // The other states a switch reports: asleep (S), waiting for a vfork
  // child (D), preempted by the other player (R, R+), and dead (X).
  for (int i = 0; i < 5; i++) usleep(2000);
  for (int i = 0; i < 5; i++) {
    const pid_t child = vfork();
    if (child == 0) {
      usleep(2000);
      _exit(0);
    }
    if (child > 0) waitpid(child, nullptr, 0);
  }
  const long long spin_until = BootNs() + 100'000'000;
  while (BootNs() < spin_until) {
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: kt-switches ROUNDS CPU\n");
    return 2;
  }
  const int rounds = atoi(argv[1]);
  const int cpu = atoi(argv[2]);
  int ready[2], go[2], ab[2], ba[2];
  if (pipe(ready) != 0 || pipe(go) != 0 || pipe(ab) != 0 || pipe(ba) != 0) Die("pipe");
  pid_t players[2];
  for (int k = 0; k < 2; k++) {
    players[k] = fork();
    if (players[k] < 0) Die("fork");
    if (players[k] == 0) {
      Player(cpu, rounds, k == 0, ready[1], go[0], k == 0 ? ba[0] : ab[0], k == 0 ? ab[1] : ba[1]);
    }
  }
  char c;
  for (int k = 0; k < 2; k++) {
    if (read(ready[0], &c, 1) != 1) Die("waiting for the players");
  }
  // Both are asleep on `go` now (or about to be: a switch into one of them
  // before it reads would be before t0, and uncounted on both sides).
  usleep(100000);

  perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof(attr);
  attr.config = static_cast<unsigned>(TracepointId());
  attr.disabled = 1;
  const long ncpus = sysconf(_SC_NPROCESSORS_CONF);
  int fds[kMaxCpus];
  int n = 0;
  char filter[64];
  snprintf(filter, sizeof(filter), "next_comm == \"%s\"", kName);
  for (int i = 0; i < ncpus && i < kMaxCpus; i++) {
    fds[n] = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, i, -1, 0));
    if (fds[n] < 0) Die("perf_event_open");
    if (ioctl(fds[n], PERF_EVENT_IOC_SET_FILTER, filter) != 0) Die("the perf filter");
    n++;
  }
  const long long t0 = BootNs();
  for (int i = 0; i < n; i++) ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0);
  if (write(go[1], "gg", 2) != 2) Die("go");
  for (pid_t p : players) waitpid(p, nullptr, 0);
  usleep(100000);
  for (int i = 0; i < n; i++) ioctl(fds[i], PERF_EVENT_IOC_DISABLE, 0);
  const long long t1 = BootNs();
  printf("t0_ns=%lld t1_ns=%lld", t0, t1);
  long long total = 0;
  for (int i = 0; i < n; i++) {
    long long count = 0;
    if (read(fds[i], &count, sizeof(count)) != sizeof(count)) Die("reading a counter");
    printf(" cpu%d=%lld", i, count);
    total += count;
  }
  printf(" total=%lld\n", total);
  return 0;
}
