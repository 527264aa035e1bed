#include "agent/cli/record_child.h"

#include <fcntl.h>
#include <spawn.h>
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

namespace ringside::agent {

namespace {

// Where execvp() looks for `cmd`: itself if it names a path, else each
// directory of PATH in turn.
std::vector<std::string> Candidates(const std::string& cmd) {
  std::vector<std::string> candidates;
  if (cmd.find('/') != std::string::npos) {
    candidates.push_back(cmd);
  } else {
    const char* path = getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
      candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", cmd));
    }
  }
  return candidates;
}

bool IsExecutableFile(const std::string& path, struct stat* st) {
  return stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

int CheckCommand(const std::string& cmd, std::string* why) {
  int result = 127;
  *why = "command not found";
  for (const std::string& c : Candidates(cmd)) {
    struct stat st;
    if (IsExecutableFile(c, &st)) return 0;
    if (stat(c.c_str(), &st) != 0) continue;
    result = 126;
    *why = S_ISDIR(st.st_mode) ? "is a directory" : "permission denied";
  }
  return result;
}

pid_t SpawnCommand(const std::vector<std::string>& args, int* exec_errno) {
  // posix_spawnp, not fork(): glibc's child shares our memory until its
  // exec (clone with CLONE_VM and CLONE_VFORK), where fork() would mark every
  // private page of the recording copy-on-write, the central ring's and the
  // chunks' among them, so that each page's next write took a page fault on
  // the writers' path (1,200 in the buffer owner, 160 in the BPF reader,
  // over 200,000 pipe round trips, on a ring populated before the fork).
  // No allocation in the child either, so other threads may run meanwhile.
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  if (const int err = posix_spawnattr_init(&attr); err != 0) {
    *exec_errno = err;
    return -1;
  }
  sigset_t none, pipe_default;
  sigemptyset(&none);
  sigemptyset(&pipe_default);
  sigaddset(&pipe_default, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &pipe_default);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  // The exec's own error comes back here too (glibc waits for the exec).
  int err = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  if (err == ENOEXEC) {
    // A file the kernel cannot run (a script without "#!") is run by the
    // shell, as execvp() does; posix_spawnp() no longer does it.
    for (const std::string& c : Candidates(args[0])) {
      struct stat st;
      if (!IsExecutableFile(c, &st)) continue;
      std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), const_cast<char*>(c.c_str())};
      sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());
      err = posix_spawn(&pid, "/bin/sh", nullptr, &attr, sh_argv.data(), environ);
      break;
    }
  }
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    *exec_errno = err;
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
