// stack_workload: threads whose stacks a recording must show (issue 54's
// proof, tests/e2e/stacks_test.cc). Built with frame pointers and symbols.
//
//   stack_workload SECONDS RESULT_FILE [crash]
//
// - "pipe-reader" blocks in a read of a pipe from wait_for_pipe_data(); a
//   writer thread writes one byte every 20 ms, so it waits about that long
//   each time;
// - "napper" sleeps 30 ms at a time from nap_between_polls();
// - "dozer" sleeps 100 us at a time from doze_briefly(): blocks shorter
//   than the default sampling period of blocked stacks (1 ms), so that their
//   sampled weight can be held against the time measured;
// - "spinner" spins in burn_cpu_in_hot_loop().
// After SECONDS it writes RESULT_FILE: each thread's tid and the
// nanoseconds the reader, the napper and the dozer spent in their system calls, as
// measured around them, then exits; with "crash", it then dies of a
// SIGSEGV (no handler, no core file), as a crashing program does, for a
// flight recorder's crash snapshot.
//
// The read and the sleep are system calls made right in those functions
// (no libc wrapper): Debian's libc has no frame pointers, and a stack
// walked by frame pointers from inside a frameless wrapper loses the
// wrapper's caller, which is the frame the proof looks for. Real programs
// meet that too; docs/analysing.md says so.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static atomic_int stop;
static int pipe_fds[2];
static int64_t read_ns, nap_ns, doze_ns;
static pid_t reader_tid, napper_tid, spinner_tid, dozer_tid;
static volatile uint64_t sink;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Inlined into its callers, so that the system call's return address is in
// them.
static inline __attribute__((always_inline)) long raw_syscall3(long nr, long a, long b, long c) {
  long ret;
#if defined(__x86_64__)
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  ret = x0;
#else
#error "stack_workload: x86-64 and arm64 only"
#endif
  return ret;
}

#define RAW_SYSCALL3(nr, a, b, c) raw_syscall3((nr), (long)(a), (long)(b), (long)(c))

NOINLINE static long wait_for_pipe_data(char* byte) {
  const int64_t start = now_ns();
  const long n = RAW_SYSCALL3(SYS_read, pipe_fds[0], byte, 1);
  read_ns += now_ns() - start;
  __asm__ volatile("" ::: "memory");  // No tail call: this frame stays.
  return n;
}

NOINLINE static void nap_between_polls(void) {
  struct timespec ts = {0, 30 * 1000 * 1000};
  const int64_t start = now_ns();
  RAW_SYSCALL3(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts);
  nap_ns += now_ns() - start;
  __asm__ volatile("" ::: "memory");
}

NOINLINE static void doze_briefly(void) {
  struct timespec ts = {0, 100 * 1000};
  const int64_t start = now_ns();
  RAW_SYSCALL3(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts);
  doze_ns += now_ns() - start;
  __asm__ volatile("" ::: "memory");
}

NOINLINE static void burn_cpu_in_hot_loop(void) {
  for (uint64_t i = 0; i < 1000000; i++) sink = sink * 31 + i;
  __asm__ volatile("" ::: "memory");
}

static void* reader(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "pipe-reader");
  reader_tid = (pid_t)syscall(SYS_gettid);
  char byte;
  while (wait_for_pipe_data(&byte) == 1 && byte != 'q') {
  }
  return NULL;
}

static void* napper(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "napper");
  napper_tid = (pid_t)syscall(SYS_gettid);
  while (!atomic_load(&stop)) nap_between_polls();
  return NULL;
}

static void* dozer(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "dozer");
  dozer_tid = (pid_t)syscall(SYS_gettid);
  while (!atomic_load(&stop)) doze_briefly();
  return NULL;
}

static void* spinner(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "spinner");
  spinner_tid = (pid_t)syscall(SYS_gettid);
  while (!atomic_load(&stop)) burn_cpu_in_hot_loop();
  return NULL;
}

int main(int argc, char** argv) {
  const int crash = argc == 4 && strcmp(argv[3], "crash") == 0;
  if (argc != 3 && !crash) {
    fprintf(stderr, "usage: %s SECONDS RESULT_FILE [crash]\n", argv[0]);
    return 2;
  }
  const double seconds = atof(argv[1]);
  if (pipe(pipe_fds) != 0) return 1;
  pthread_t threads[4];
  pthread_create(&threads[0], NULL, reader, NULL);
  pthread_create(&threads[1], NULL, napper, NULL);
  pthread_create(&threads[2], NULL, spinner, NULL);
  pthread_create(&threads[3], NULL, dozer, NULL);
  const int64_t end = now_ns() + (int64_t)(seconds * 1e9);
  while (now_ns() < end) {
    usleep(20 * 1000);
    if (write(pipe_fds[1], "x", 1) != 1) return 1;
  }
  atomic_store(&stop, 1);
  if (write(pipe_fds[1], "q", 1) != 1) return 1;
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  FILE* f = fopen(argv[2], "w");
  if (f == NULL) return 1;
  fprintf(f,
          "reader_tid %d\nnapper_tid %d\nspinner_tid %d\ndozer_tid %d\nread_ns %lld\n"
          "nap_ns %lld\ndoze_ns %lld\n",
          reader_tid, napper_tid, spinner_tid, dozer_tid, (long long)read_ns, (long long)nap_ns,
          (long long)doze_ns);
  if (fclose(f) != 0) return 1;
  if (crash) {
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  return 0;
}
