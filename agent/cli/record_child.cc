#include "agent/cli/record_child.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

int CheckCommand(const std::string& cmd, std::string* why) {
  std::vector<std::string> candidates;
  if (cmd.find('/') != std::string::npos) {
    candidates.push_back(cmd);
  } else {
    const char* path = getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
      candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", cmd));
    }
  }
  int result = 127;
  *why = "command not found";
  for (const std::string& c : candidates) {
    struct stat st;
    if (stat(c.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode) && access(c.c_str(), X_OK) == 0) return 0;
    result = 126;
    *why = S_ISDIR(st.st_mode) ? "is a directory" : "permission denied";
  }
  return result;
}

pid_t SpawnCommand(const std::vector<std::string>& args, int* exec_errno) {
  // Built before fork(): the recording's threads run meanwhile, and a child
  // of a threaded process may call only async-signal-safe functions before
  // exec. An allocation there waits forever on a lock another thread held
  // at the fork (GCC 12's AddressSanitizer takes no allocator lock around
  // fork), and this thread with it, in the read below.
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int report_fds[2];
  if (pipe2(report_fds, O_CLOEXEC) != 0) {
    *exec_errno = errno;
    return -1;
  }
  base::ScopedFd report_read(report_fds[0]);
  base::ScopedFd report_write(report_fds[1]);
  const pid_t pid = fork();
  if (pid == 0) {
    report_read.reset();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv.data());
    const int err = errno;
    (void)!write(report_write.get(), &err, sizeof(err));
    _exit(127);
  }
  report_write.reset();
  int err = 0;
  // EOF (the pipe closed by a successful exec) or the child's errno.
  const ssize_t n = base::RetryOnEintr([&] { return read(report_read.get(), &err, sizeof(err)); });
  report_read.reset();
  if (pid < 0 || n == sizeof(err)) {
    *exec_errno = pid < 0 ? errno : err;
    if (pid > 0) waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

int StopCommand(pid_t pid, const std::string& name, int sig, const sigset_t& signals,
                absl::Duration grace, bool tty) {
  kill(pid, sig);
  const absl::Time give_up = absl::Now() + grace;
  bool killed = false;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    const absl::Duration left = std::max(give_up - absl::Now(), absl::ZeroDuration());
    timespec ts = absl::ToTimespec(std::min(absl::Milliseconds(200), left));
    const int taken = sigtimedwait(&signals, nullptr, &ts);
    const bool again = taken == SIGINT || taken == SIGTERM || taken == SIGHUP;
    if (!killed && (again || absl::Now() >= give_up)) {
      std::fprintf(stderr, "%sringside record: %s did not end on %s; killing it\n", tty ? "\n" : "",
                   name.c_str(), strsignal(sig));
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  return status;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("command exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("command killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "command ended";
}

}  // namespace ringside::agent
