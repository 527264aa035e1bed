// The main() of every test binary: GoogleTest's, plus a watchdog that names a
// test that hangs.
//
// A test that waits forever (a deadlock, a child that never answers) used to
// show only as a whole binary killed by tools/run_tests.sh's timeout, half an
// hour later and with no name. The watchdog ends the binary when one test has
// run longer than RINGSIDE_TEST_HANG_S seconds (default 300, ten times the
// slowest test under ASan), after printing the test's name and where each of
// the binary's threads waits: in the kernel, and (with gdb installed, as
// `make deps` does) in its own code. The binary then exits without
// GoogleTest's summary, which the runner reports as broken, with this output.
// The children it still has are printed the same way, then killed.

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

// Seconds one test may run before the binary is ended.
int HangLimitSeconds() {
  const char* v = std::getenv("RINGSIDE_TEST_HANG_S");
  if (v == nullptr || *v == '\0') return 300;
  int s = std::atoi(v);
  return s > 0 ? s : 300;
}

// The first line of a small /proc file, or "?" if it cannot be read.
std::string ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "?";
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// Prints each thread of the process at `proc` ("/proc/self", "/proc/PID"):
// name, state, the kernel function it waits in and (as root) its kernel
// stack.
void PrintThreads(const std::string& proc) {
  DIR* dir = opendir((proc + "/task").c_str());
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string task = proc + "/task/" + e->d_name;
    std::string comm = ReadProcFile(task + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    std::string status = ReadProcFile(task + "/status");
    std::string state = "?";
    size_t at = status.find("State:");
    if (at != std::string::npos) state = status.substr(at + 7, status.find('\n', at) - at - 7);
    std::fprintf(stderr, "  thread %s (%s): %s, waits in %s\n", e->d_name, comm.c_str(),
                 state.c_str(), ReadProcFile(task + "/wchan").c_str());
    std::string stack = ReadProcFile(task + "/stack");
    if (!stack.empty() && stack != "?") std::fprintf(stderr, "%s", stack.c_str());
  }
  closedir(dir);
}

// What the watchdog's thread and GoogleTest's listener share. Never freed:
// the thread outlives the listener, which GoogleTest deletes at exit.
struct WatchState {
  std::mutex mu;
  std::condition_variable cv;
  std::string name;                                // Guarded by mu.
  std::chrono::steady_clock::time_point deadline;  // Guarded by mu.
  bool running = false;                            // Guarded by mu.
};
WatchState* const g_watch = new WatchState;

// Every thread's backtrace of process `pid`, printed by gdb attached to it
// (as root, a process may attach to its own children and parent). Nothing
// when gdb is missing.
void PrintBacktraces(pid_t pid) {
  const std::string pid_text = std::to_string(pid);
  const pid_t child = fork();
  if (child == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execlp("gdb", "gdb", "-p", pid_text.c_str(), "-batch", "-nx", "-ex", "thread apply all bt",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

// The processes this one started that still run (an agent the test waits
// for, say): often the half of a hang that is not in the test.
std::vector<pid_t> Children() {
  std::vector<pid_t> children;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return children;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream in(ReadProcFile(std::string("/proc/self/task/") + e->d_name + "/children"));
    for (pid_t pid; in >> pid;) children.push_back(pid);
  }
  closedir(dir);
  return children;
}

// Ends the binary once a test has run past its deadline.
void Watch(std::chrono::seconds limit) {
  std::unique_lock<std::mutex> lock(g_watch->mu);
  for (;;) {
    if (!g_watch->running) {
      g_watch->cv.wait(lock);
      continue;
    }
    if (g_watch->cv.wait_until(lock, g_watch->deadline) == std::cv_status::no_timeout) continue;
    if (!g_watch->running || std::chrono::steady_clock::now() < g_watch->deadline) continue;
    std::fprintf(stderr, "\n[  HUNG    ] %s has run for more than %lld s (RINGSIDE_TEST_HANG_S)\n",
                 g_watch->name.c_str(), static_cast<long long>(limit.count()));
    PrintThreads("/proc/self");
    PrintBacktraces(getpid());
    for (pid_t child : Children()) {
      std::fprintf(stderr, "\n[  HUNG    ] its child %d:\n", child);
      PrintThreads("/proc/" + std::to_string(child));
      PrintBacktraces(child);
      kill(child, SIGKILL);  // Ours, and no longer waited for.
    }
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(124);
  }
}

// Arms the watchdog for each test.
class HangWatchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit HangWatchdog(int limit_s) : limit_(limit_s) { std::thread(Watch, limit_).detach(); }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(g_watch->mu);
    g_watch->name = std::string(info.test_suite_name()) + "." + info.name();
    g_watch->deadline = std::chrono::steady_clock::now() + limit_;
    g_watch->running = true;
    g_watch->cv.notify_all();
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(g_watch->mu);
    g_watch->running = false;
  }

 private:
  const std::chrono::seconds limit_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Owned by GoogleTest from here on; its thread lives as long as the binary.
  ::testing::UnitTest::GetInstance()->listeners().Append(new HangWatchdog(HangLimitSeconds()));
  return RUN_ALL_TESTS();
}
