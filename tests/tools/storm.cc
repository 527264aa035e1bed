// storm: drives sched_switch, sched_wakeup and process events at the
// machine's maximum rate, for load tests of the agent.
//
//   storm [--duration S] [--pairs N] [--forkers N] [--exec] [--comm NAME]
//         [--cgroup DIR] [--hold] [--pause-us N]
//
// - pairs: N pairs of threads passing a byte back and forth over two pipes
//   (as `perf bench sched pipe` does): each round trip is two wakeups and at
//   least two context switches.
// - forkers: N threads that fork a child that exits at once (with --exec:
//   that execs /bin/true), and reap it, in a loop.
// - --comm NAME: every task of the storm (threads, children) is called NAME,
//   so a perf filter on comm selects exactly the storm's tasks.
// - --cgroup DIR: the storm moves itself into that cgroup (its
//   cgroup.procs) before starting anything, so its children are in it too.
// - --pause-us N: a quiet load instead of a storm: every pinger and forker
//   waits for a tick between two round trips or forks. The ticks come from
//   a ticker process, forked before the storm joins its cgroup or takes its
//   name, that writes a byte into a pipe every N microseconds.
//
// No task of the storm is ever woken by a timer: a sleeper's timer wakes it
// from a hard interrupt, and for a few of those wakeups (0 to 5 of some
// 1,000, on this machine's 6.18 guest kernel) the kernel runs neither the
// BPF programs attached to sched_waking nor, sometimes, perf's counters,
// while ftrace records them; tests that count the storm's events exactly
// need every wakeup to come from a task. So the ticker (not counted: other
// cgroup, other name) sleeps in the storm's place and wakes it with a
// write, each worker watches the clock for the end of the storm itself,
// and the main thread is woken by the last worker to stop (a pipe), not by
// a timeout. (Spinning instead of sleeping made the quiet load anything but
// quiet on a loaded machine: every preemption is two switches.)
// - --hold: the storm sets up its threads, prints "ready", and waits for a
//   line on stdin before it starts; when done it prints its JSON and waits
//   for stdin to close before it exits. Between the two, and before the
//   start, the storm does nothing at all: one thread blocked in poll(). A
//   test opens its kernel counters in those quiet moments.
//
// It stops by itself after --duration seconds, or at SIGINT / SIGTERM
// (then it stops its threads, reaps its children and still prints its
// JSON): {"duration_s":..,"pairs":..,"forkers":..,"round_trips":..,
// "forks":..,"execs":..,"round_trips_per_s":..,"forks_per_s":..}.
// Exits 0, or 2 on a bad flag, 1 when the setup fails.

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  double duration_s = 10;
  int pairs = 0;  // 0: one per CPU.
  int forkers = 1;
  bool exec = false;
  std::string comm;
  std::string cgroup;
  bool hold = false;
  int pause_us = 0;
};

std::atomic<bool> g_stop{false};
double g_deadline = 0;               // MonotonicS() at which the workers stop.
std::atomic<int> g_workers_left{0};  // The last to stop writes to g_done[1].
int g_done[2] = {-1, -1};
int g_tick_fd = -1;  // The ticker's pipe (--pause-us), else -1.
std::atomic<uint64_t> g_round_trips{0};
std::atomic<uint64_t> g_forks{0};
std::atomic<uint64_t> g_execs{0};

double MonotonicS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void NameThisTask(const std::string& comm) {
  if (!comm.empty()) prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
}

bool Running() { return !g_stop.load(std::memory_order_relaxed) && MonotonicS() < g_deadline; }

// Waits for the ticker's next tick (see the top).
void WaitForTick() {
  char c;
  while (read(g_tick_fd, &c, 1) < 0 && errno == EINTR) {
  }
}

// Forks the ticker: a byte into a pipe every `us` microseconds until the
// pipe's reader is gone (it then dies of SIGPIPE), or the storm is.
// Returns its pid, and the pipe's read end in g_tick_fd.
pid_t StartTicker(int us) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    close(fds[0]);
    const char c = 0;
    do {
      usleep(static_cast<useconds_t>(us));
    } while (write(fds[1], &c, 1) == 1);
    _exit(0);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return -1;
  }
  g_tick_fd = fds[0];
  return pid;
}

void WorkerDone() {
  if (g_workers_left.fetch_sub(1) == 1) {
    const char c = 0;
    if (write(g_done[1], &c, 1) != 1) std::perror("storm: done pipe");
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "storm: %s\nusage: storm [--duration S] [--pairs N] [--forkers N] [--exec] "
               "[--comm NAME] [--cgroup DIR] [--hold] [--pause-us N]\n",
               why);
  return 2;
}

bool ParseInt(const char* s, int* out, long max = 4096) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max) return false;
  *out = static_cast<int>(v);
  return true;
}

// One pair: `ping` sends a byte and waits for it back, `pong` echoes. The
// pinger checks the stop flag between round trips and then closes its
// write end: the ponger reads end-of-file and returns too.
struct Pair {
  int ab[2] = {-1, -1};  // ping -> pong
  int ba[2] = {-1, -1};  // pong -> ping
  std::thread ping, pong;
};

void Ping(Pair* p, const std::string& comm, int pause_us) {
  NameThisTask(comm);
  char c = 0;
  uint64_t n = 0;
  while (Running()) {
    if (write(p->ab[1], &c, 1) != 1 || read(p->ba[0], &c, 1) != 1) break;
    n++;
    if (pause_us > 0) WaitForTick();
  }
  g_round_trips.fetch_add(n);
  close(p->ab[1]);
  WorkerDone();
}

void Pong(Pair* p, const std::string& comm) {
  NameThisTask(comm);
  char c;
  while (read(p->ab[0], &c, 1) == 1 && write(p->ba[1], &c, 1) == 1) {
  }
}

void Fork(bool exec, const std::string& comm, int pause_us) {
  NameThisTask(comm);
  uint64_t forks = 0, execs = 0;
  while (Running()) {
    const pid_t child = fork();
    if (child == 0) {
      if (exec) {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(127);
      }
      _exit(0);
    }
    if (child < 0) {
      usleep(1000);  // Out of pids or memory for a moment.
      continue;
    }
    forks++;
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (exec && WIFEXITED(status) && WEXITSTATUS(status) == 0) execs++;
    if (pause_us > 0) WaitForTick();
  }
  g_forks.fetch_add(forks);
  g_execs.fetch_add(execs);
  WorkerDone();
}

// Waits for a line on stdin (`want_line`) or its end, or for a stop signal
// on `sigfd`, whichever comes first; false on a signal.
bool WaitForStdin(int sigfd, bool want_line) {
  std::string line;
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {sigfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[1].revents & POLLIN) return false;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[256];
      const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n <= 0) return true;  // Closed: that ends both waits.
      if (want_line && std::memchr(buf, '\n', static_cast<size_t>(n)) != nullptr) return true;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--duration" && has_value) {
      char* end = nullptr;
      o.duration_s = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(o.duration_s > 0) || o.duration_s > 86400) {
        return Usage("--duration takes seconds, more than 0");
      }
    } else if (a == "--pairs" && has_value) {
      if (!ParseInt(argv[++i], &o.pairs)) return Usage("--pairs takes 0 to 4096");
    } else if (a == "--forkers" && has_value) {
      if (!ParseInt(argv[++i], &o.forkers)) return Usage("--forkers takes 0 to 4096");
    } else if (a == "--comm" && has_value) {
      o.comm = argv[++i];
      if (o.comm.empty() || o.comm.size() > 15) return Usage("--comm takes 1 to 15 characters");
    } else if (a == "--cgroup" && has_value) {
      o.cgroup = argv[++i];
    } else if (a == "--pause-us" && has_value) {
      if (!ParseInt(argv[++i], &o.pause_us, 10'000'000)) {
        return Usage("--pause-us takes 0 to 10000000");
      }
    } else if (a == "--exec") {
      o.exec = true;
    } else if (a == "--hold") {
      o.hold = true;
    } else {
      return Usage(("unknown or incomplete flag " + a).c_str());
    }
  }
  if (o.pairs == 0) o.pairs = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));

  // Stop signals go to a signalfd, read by this thread only; the threads
  // and children start with them blocked (children reset their mask at
  // exec, and exit at once otherwise).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  const int sigfd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (sigfd < 0) {
    std::perror("storm: signalfd");
    return 1;
  }
  // A storm whose parent dies stops too (a test that crashed).
  prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  // Before the cgroup and the name: the ticker is not the storm's.
  pid_t ticker = -1;
  if (o.pause_us > 0 && (ticker = StartTicker(o.pause_us)) < 0) {
    std::perror("storm: ticker");
    return 1;
  }
  if (!o.cgroup.empty()) {
    const std::string procs = o.cgroup + "/cgroup.procs";
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    const std::string pid = std::to_string(getpid()) + "\n";
    if (fd < 0 || write(fd, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) {
      std::fprintf(stderr, "storm: cannot join cgroup %s: %s\n", o.cgroup.c_str(),
                   std::strerror(errno));
      return 1;
    }
    close(fd);
  }
  NameThisTask(o.comm);

  if (pipe2(g_done, O_CLOEXEC) != 0) {
    std::perror("storm: pipe");
    return 1;
  }
  std::vector<Pair> pairs(static_cast<size_t>(o.pairs));
  for (Pair& p : pairs) {
    if (pipe2(p.ab, O_CLOEXEC) != 0 || pipe2(p.ba, O_CLOEXEC) != 0) {
      std::perror("storm: pipe");
      return 1;
    }
  }
  if (o.hold) {
    std::printf("ready\n");
    std::fflush(stdout);
    if (!WaitForStdin(sigfd, /*want_line=*/true)) g_stop = true;
  }

  const double start = MonotonicS();
  std::vector<std::thread> forkers;
  const bool started = !g_stop;
  if (started) {
    g_deadline = start + o.duration_s;
    g_workers_left = o.pairs + o.forkers;
    for (Pair& p : pairs) {
      p.pong = std::thread(Pong, &p, o.comm);
      p.ping = std::thread(Ping, &p, o.comm, o.pause_us);
    }
    for (int i = 0; i < o.forkers; i++) forkers.emplace_back(Fork, o.exec, o.comm, o.pause_us);
    // Until a stop signal, or the last worker is done (no timer: see the
    // top). There is at least one pair.
    pollfd fds[2] = {{sigfd, POLLIN, 0}, {g_done[0], POLLIN, 0}};
    while (poll(fds, 2, -1) < 0 && errno == EINTR) {
    }
  }
  g_stop = true;
  for (Pair& p : pairs) {
    if (p.ping.joinable()) p.ping.join();
    if (p.pong.joinable()) p.pong.join();
    for (int fd : {p.ab[0], p.ba[0], p.ba[1]}) close(fd);
    if (!started) close(p.ab[1]);  // Ping() closes it otherwise.
  }
  for (std::thread& t : forkers) t.join();
  const double elapsed = MonotonicS() - start;

  const uint64_t trips = g_round_trips.load(), forks = g_forks.load(), execs = g_execs.load();
  std::printf(
      "{\"duration_s\":%.3f,\"pairs\":%d,\"forkers\":%d,\"round_trips\":%llu,\"forks\":%llu,"
      "\"execs\":%llu,\"round_trips_per_s\":%.0f,\"forks_per_s\":%.0f}\n",
      elapsed, o.pairs, o.forkers, static_cast<unsigned long long>(trips),
      static_cast<unsigned long long>(forks), static_cast<unsigned long long>(execs),
      elapsed > 0 ? static_cast<double>(trips) / elapsed : 0,
      elapsed > 0 ? static_cast<double>(forks) / elapsed : 0);
  std::fflush(stdout);
  if (o.hold) WaitForStdin(sigfd, /*want_line=*/false);
  if (ticker > 0) {
    kill(ticker, SIGKILL);
    waitpid(ticker, nullptr, 0);
  }
  return 0;
}
