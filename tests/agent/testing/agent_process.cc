#include "tests/agent/testing/agent_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/control/control_client.h"
#include "tests/testing/paths.h"

namespace ringside::agent::testing {

FakeNotifySocket::FakeNotifySocket(const std::string& path) : path_(path) {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

FakeNotifySocket::~FakeNotifySocket() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
}

std::string FakeNotifySocket::Receive(absl::Duration timeout) {
  if (fd_ < 0) return "";
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return "";
  char buf[4096];
  const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::vector<std::string> FakeNotifySocket::ReceiveUntil(const std::string& line,
                                                        absl::Duration timeout,
                                                        const std::function<bool()>& until) {
  std::vector<std::string> got;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string d = Receive(std::min(deadline - absl::Now(), absl::Milliseconds(100)));
    if (d.empty()) {
      if (until && until()) return {};
      continue;
    }
    got.push_back(d);
    for (absl::string_view l : absl::StrSplit(d, '\n')) {
      if (l == line) return got;
    }
  }
  return {};
}

AgentProcess::AgentProcess(const std::vector<std::string>& args, const std::string& log_path,
                           const std::string& notify_socket, const std::vector<std::string>& env,
                           const std::optional<PrivateTmpfs>& tmpfs, const Degradation& degradation)
    : log_path_(log_path) {
  // Everything the child needs is built before fork(): the test process
  // has threads, and a child of a threaded process may only call
  // async-signal-safe functions (no allocation, no setenv) before exec.
  const std::string binary = ringside::testing::RingsideBinary();
  std::vector<std::string> arg_strings = {binary, "agent"};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The test's environment without the systemd variables (the agent gets
  // only the ones the test asks for), then `env`, whose entries win.
  std::vector<std::string> env_strings;
  auto name_of = [](absl::string_view entry) { return entry.substr(0, entry.find('=')); };
  auto overridden = [&](absl::string_view name) {
    if (name == "NOTIFY_SOCKET" || name == "WATCHDOG_USEC" || name == "JOURNAL_STREAM") return true;
    for (const std::string& e : env) {
      if (name_of(e) == name) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; e++) {
    if (!overridden(name_of(*e))) env_strings.emplace_back(*e);
  }
  if (!notify_socket.empty()) env_strings.push_back("NOTIFY_SOCKET=" + notify_socket);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const std::string tmpfs_dir = tmpfs ? tmpfs->dir : "";
  const std::string tmpfs_options =
      tmpfs ? absl::StrCat("size=", tmpfs->size_bytes, ",mode=0750") : "";
  static constexpr char kNoTmpfs[] = "test: cannot set up the agent's private tmpfs\n";

  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  const pid_t test_pid = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // A test process killed before its destructor runs (a timeout) takes
    // its agent with it, rather than leaving it recording on the machine.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != test_pid) _exit(125);
    if (log_fd < 0 || dup2(log_fd, STDERR_FILENO) < 0) _exit(125);
    if (null_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0 || dup2(null_fd, STDIN_FILENO) < 0) {
      _exit(125);
    }
    // The test's own signal mask is not the agent's.
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!tmpfs_dir.empty()) {
      // Private first, so that the tmpfs never propagates to the test's
      // namespace (systemd makes / shared).
      if (unshare(CLONE_NEWNS) != 0 ||
          mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          mount("ringside-test", tmpfs_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                tmpfs_options.c_str()) != 0) {
        (void)!write(STDERR_FILENO, kNoTmpfs, sizeof(kNoTmpfs) - 1);
        _exit(124);
      }
    }
    if (const int failed = ApplyInChild(degradation); failed != 0) _exit(failed);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(126);
  }
  if (log_fd >= 0) close(log_fd);
  if (null_fd >= 0) close(null_fd);
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string AgentProcess::SeenByAgent(const std::string& path) const {
  return absl::StrCat("/proc/", pid_, "/root", path);
}

bool AgentProcess::Signal(int sig) { return pid_ > 0 && kill(pid_, sig) == 0; }

std::optional<int> AgentProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return status;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

std::string AgentProcess::Log() const {
  std::ifstream in(log_path_);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

namespace {

std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Process `pid`'s state letter (R, S, D, Z...) from /proc/PID/stat, '?' if
// it cannot be read.
char ProcessState(const std::string& stat) {
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
}

}  // namespace

bool AgentProcess::Exited() const {
  return pid_ <= 0 || ProcessState(ReadProcFile(absl::StrCat("/proc/", pid_, "/stat"))) == 'Z';
}

absl::Status AgentProcess::WaitReady(FakeNotifySocket* notify, absl::Duration timeout) {
  if (!notify->ReceiveUntil("READY=1", timeout, [this] { return Exited(); }).empty()) {
    return absl::OkStatus();
  }
  if (Exited()) {
    const std::optional<int> status = WaitExit(absl::Seconds(5));
    return absl::FailedPreconditionError(
        absl::StrCat("the agent exited before READY=1 (wait status ",
                     status ? absl::StrCat(*status) : std::string("unknown"), ")"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no READY=1 within ", absl::FormatDuration(timeout), "; its threads:", ThreadsOf(pid_)));
}

std::string ThreadsOf(pid_t pid) {
  const std::string proc = absl::StrCat("/proc/", pid);
  std::string threads;
  DIR* d = opendir((proc + "/task").c_str());
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    const std::string task = absl::StrCat(proc, "/task/", e->d_name);
    std::string comm = ReadProcFile(task + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    absl::StrAppend(&threads, "\n  thread ", e->d_name, " (", comm, ") state ",
                    std::string(1, ProcessState(ReadProcFile(task + "/stat"))), " in ",
                    ReadProcFile(task + "/wchan"), "\n", ReadProcFile(task + "/stack"));
  }
  if (d != nullptr) closedir(d);
  return threads;
}

absl::StatusOr<control::Reply> Ask(const std::string& socket, const control::Request& request,
                                   absl::Duration timeout) {
  return CallAgent(socket, request, timeout);
}

control::Request StatusRequest() {
  control::Request r;
  r.mutable_status();
  return r;
}

control::Request SnapshotRequest(const std::string& reason, bool wait) {
  control::Request r;
  r.mutable_snapshot()->set_reason(reason);
  r.mutable_snapshot()->set_wait(wait);
  return r;
}

}  // namespace ringside::agent::testing
