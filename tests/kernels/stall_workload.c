// The stall step's workload (tests/kernels/init.sh, issue 56), static in
// the initramfs:
//   kt-stall hold MS           names itself rskt-held and stays in D for MS
//                              ms: it waits for a vfork-style child of its
//                              own (rskt-kid) that sleeps MS ms and exits.
//   kt-stall starve CPU SECS CGROUP
//                              a task (rskt-wakee) that wakes every 10 ms
//                              and three spinners (rskt-hog), all pinned to
//                              CPU and in the cgroup v2 directory CGROUP
//                              (whose cpu.max the caller sets), for SECS
//                              seconds: the spinners use up the cgroup's
//                              quota, and the wakee waits for its CPU until
//                              the next period; then prints a line of what
//                              the wakee waited and the cgroup's throttling.
//                              (Real-time spinners would do it without a
//                              cgroup, but on a PREEMPT_RT kernel they hold
//                              the CPU's timer and RCU threads, of the same
//                              priority, too.)
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static long hold_ms;
static char kid_stack[64 * 1024] __attribute__((aligned(16)));

static int kid(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "rskt-kid", 0, 0, 0);
  sleep_ms(hold_ms);
  _exit(0);
}

static int hold(long ms) {
  hold_ms = ms;
  prctl(PR_SET_NAME, "rskt-held", 0, 0, 0);
  const pid_t k = clone(kid, kid_stack + sizeof(kid_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  if (k < 0) return perror("clone"), 1;
  waitpid(k, NULL, 0);
  return 0;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    perror("sched_setaffinity");
    exit(1);
  }
}

// A child named `comm` that spins or wakes every 10 ms; it runs where its
// parent does (pinned before the fork), and joins the cgroup only when the
// parent moves it there.
static pid_t start(const char* comm, int spin) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  prctl(PR_SET_NAME, comm, 0, 0, 0);
  if (spin) {
    for (volatile unsigned long n = 0;; n++) {
    }
  }
  for (;;) sleep_ms(10);
}

// Appends `path`'s first line starting with `key` (or "?") to `out`, after
// `label`, its spaces made colons: one word, as init.sh's records are.
static void first_line(const char* path, const char* key, const char* label, char* out,
                       size_t size) {
  char line[256];
  FILE* f = fopen(path, "r");
  const char* found = "?";
  while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, key, strlen(key)) == 0) {
      line[strcspn(line, "\n")] = 0;
      found = line;
      break;
    }
  }
  snprintf(out + strlen(out), size - strlen(out), "%s%s", label, found);
  for (char* c = out; *c != 0; c++) {
    if (*c == ' ') *c = ':';
  }
  if (f != NULL) fclose(f);
}

// The four are forked pinned (the parent pins itself first) and running
// before any joins the cgroup: a child that joined a throttled cgroup
// before pinning itself once stayed on another CPU for hundreds of ms.
// Prints what the run did, for a failed check to show: the wakee's
// schedstat (ns on the CPU, ns waiting for it, times run) and the cgroup's
// throttled periods, e.g.
// cpu:1,wakee_schedstat:59362128:2610915296:41,nr_throttled:30
static int starve(int cpu, int secs, const char* cgroup) {
  pin(cpu);
  pid_t pids[4];
  pids[0] = start("rskt-wakee", 0);
  for (int i = 1; i < 4; i++) pids[i] = start("rskt-hog", 1);
  char procs[256];
  snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
  for (int i = 0; i < 4; i++) {
    FILE* f = fopen(procs, "w");
    if (f == NULL || fprintf(f, "%d\n", pids[i]) < 0 || fclose(f) != 0) {
      perror(procs);
      for (int k = 0; k < 4; k++) kill(pids[k], SIGKILL);
      for (int k = 0; k < 4; k++) waitpid(pids[k], NULL, 0);
      return 1;
    }
  }
  sleep_ms(secs * 1000L);
  char report[512] = "", path[256];
  snprintf(path, sizeof(path), "/proc/%d/schedstat", pids[0]);
  first_line(path, "", ",wakee_schedstat:", report, sizeof(report));
  snprintf(path, sizeof(path), "%s/cpu.stat", cgroup);
  first_line(path, "nr_throttled", ",", report, sizeof(report));
  for (int i = 0; i < 4; i++) kill(pids[i], SIGKILL);
  for (int i = 0; i < 4; i++) waitpid(pids[i], NULL, 0);
  printf("cpu:%d%s\n", cpu, report);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "hold") == 0) return hold(atol(argv[2]));
  if (argc == 5 && strcmp(argv[1], "starve") == 0) {
    return starve(atoi(argv[2]), atoi(argv[3]), argv[4]);
  }
  fprintf(stderr, "usage: kt-stall hold MS | kt-stall starve CPU SECONDS CGROUP\n");
  return 2;
}
