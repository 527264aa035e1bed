#include "tests/deploy/testing/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ringside::deploy_testing {
namespace {

constexpr char kHostTracefs[] = "/sys/kernel/tracing";

// A step with its paths as the child sees them before pivot_root, and
// what it does in words for the line a failure prints.
struct PreparedStep {
  int kind = 0;
  std::string target;
  std::string source;
  std::string options;
  mode_t mode = 0755;
  bool read_only = false;
  std::string what;
};

// What the child between fork() and execve() may do: system calls only (the
// test process may have threads; a child of one must not allocate).
void WriteLine(const char* a, const char* b, int err) {
  (void)!write(STDERR_FILENO, "sandbox: ", 9);
  (void)!write(STDERR_FILENO, a, strlen(a));
  if (b != nullptr) {
    (void)!write(STDERR_FILENO, ": ", 2);
    (void)!write(STDERR_FILENO, b, strlen(b));
  }
  if (err != 0) {
    const char* name = strerrorname_np(err);
    (void)!write(STDERR_FILENO, ": ", 2);
    if (name != nullptr) (void)!write(STDERR_FILENO, name, strlen(name));
  }
  (void)!write(STDERR_FILENO, "\n", 1);
}

bool MakeReadOnly(const char* path, bool recursive) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  return mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof(attr)) == 0;
}

bool DropCapabilities(uint64_t keep) {
  for (int cap = 0; cap < 64; cap++) {
    if ((keep >> cap) & 1) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return false;
  }
  return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0;
}

// execve() of each candidate in turn (argv[0] looked up on PATH, as
// execvp() does); returns only if none could be run.
void ExecFirst(const std::vector<std::string>& candidates, char* const* argv, char* const* envp) {
  for (const std::string& c : candidates) {
    execve(c.c_str(), argv, envp);
    if (errno != ENOENT && errno != ENOTDIR) break;
  }
  WriteLine("cannot run", argv[0], errno);
}

// The candidates for argv0: itself when it names a path, else each PATH
// directory of `env` (inside the new root) followed by it.
std::vector<std::string> Candidates(const std::string& argv0, const std::vector<std::string>& env) {
  if (absl::StrContains(argv0, '/')) return {argv0};
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "PATH=")) path = e.substr(5);
  }
  std::vector<std::string> out;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    out.push_back(absl::StrCat(dir, "/", argv0));
  }
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string Normalized(const std::string& at) {
  std::string out = "/";
  for (absl::string_view part : absl::StrSplit(at, '/', absl::SkipEmpty())) {
    if (out.size() > 1) out += "/";
    absl::StrAppend(&out, part);
  }
  return out;
}

}  // namespace

void SandboxSpec::Parents(const std::string& at) {
  std::string prefix;
  const std::vector<std::string> parts = absl::StrSplit(Normalized(at), '/', absl::SkipEmpty());
  for (size_t i = 0; i + 1 < parts.size(); i++) {
    absl::StrAppend(&prefix, "/", parts[i]);
    steps_.push_back({Kind::kDir, prefix, "", "", 0755, false});
  }
}

void SandboxSpec::Dir(const std::string& at, mode_t mode) {
  Parents(at);
  steps_.push_back({Kind::kDir, Normalized(at), "", "", mode, false});
}

void SandboxSpec::Symlink(const std::string& link_target, const std::string& at) {
  Parents(at);
  steps_.push_back({Kind::kSymlink, Normalized(at), link_target, "", 0, false});
}

void SandboxSpec::Bind(const std::string& host_path, const std::string& at, bool read_only) {
  struct stat st;
  const bool dir = stat(host_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (dir) {
    Dir(at);
  } else {
    Parents(at);
    steps_.push_back({Kind::kFile, Normalized(at), "", "", 0644, false});
  }
  steps_.push_back({Kind::kBind, Normalized(at), host_path, "", 0, read_only});
}

void SandboxSpec::Tmpfs(const std::string& at, const std::string& options) {
  Dir(at);
  steps_.push_back({Kind::kTmpfs, Normalized(at), "", options, 0, false});
}

void SandboxSpec::Proc(const std::string& at) {
  Dir(at);
  steps_.push_back({Kind::kProc, Normalized(at), "", "", 0, false});
}

void SandboxSpec::Sysfs(const std::string& at, bool read_only) {
  Dir(at);
  steps_.push_back({Kind::kSysfs, Normalized(at), "", "", 0, read_only});
}

void SandboxSpec::ReadOnly(const std::string& at) {
  steps_.push_back({Kind::kReadOnly, Normalized(at), "", "", 0, true});
}

SandboxProcess::SandboxProcess(const SandboxSpec& spec, const std::string& root_dir,
                               const std::vector<std::string>& argv, const std::string& log_path)
    : spec_(spec), log_path_(log_path) {
  using Kind = SandboxSpec::Kind;
  // Everything the child uses is built here, before fork().
  std::vector<PreparedStep> steps;
  for (const SandboxSpec::Step& s : spec.steps_) {
    PreparedStep p;
    p.kind = static_cast<int>(s.kind);
    p.target = root_dir + (s.at == "/" ? "" : s.at);
    p.source = s.source;
    p.options = s.options;
    p.mode = s.mode;
    p.read_only = s.read_only;
    static const char* const kWhat[] = {"mkdir",       "create",        "symlink",
                                        "bind mount",  "mount tmpfs",   "mount proc",
                                        "mount sysfs", "make read-only"};
    p.what = absl::StrCat(kWhat[p.kind], " ", s.at, s.source.empty() ? "" : " from ", s.source);
    steps.push_back(std::move(p));
  }
  const std::string root_what = absl::StrCat("mount the new root's tmpfs on ", root_dir);
  std::vector<std::string> arg_strings = argv;
  std::vector<char*> c_argv = CStrings(arg_strings);
  std::vector<std::string> env_strings = spec.env;
  std::vector<char*> c_env = CStrings(env_strings);
  const std::vector<std::string> candidates = Candidates(argv.at(0), spec.env);

  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  const pid_t test_pid = getpid();
  pid_ = fork();
  if (pid_ != 0) {
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return;
  }
  // The child.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != test_pid) _exit(125);
  if (log_fd < 0 || null_fd < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
      dup2(log_fd, STDERR_FILENO) < 0 || dup2(null_fd, STDIN_FILENO) < 0) {
    _exit(125);
  }
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Private first, so that no mount below propagates to the host (systemd
  // makes / shared).
  if (unshare(CLONE_NEWNS | (spec.private_network ? CLONE_NEWNET : 0) |
              (spec.hostname.empty() ? 0 : CLONE_NEWUTS)) != 0) {
    WriteLine("unshare", nullptr, errno);
    _exit(124);
  }
  if (!spec.hostname.empty() && sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    WriteLine("sethostname", nullptr, errno);
    _exit(124);
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    WriteLine("make / private", nullptr, errno);
    _exit(124);
  }
  struct statfs fs;
  if (spec.host_tracefs && (statfs(kHostTracefs, &fs) != 0 || fs.f_type != TRACEFS_MAGIC) &&
      mount("tracefs", kHostTracefs, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    WriteLine("mount tracefs on", kHostTracefs, errno);
    _exit(124);
  }
  if (mount("sandbox-root", root_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
    WriteLine(root_what.c_str(), nullptr, errno);
    _exit(124);
  }
  for (const PreparedStep& p : steps) {
    const char* t = p.target.c_str();
    bool ok = true;
    switch (static_cast<Kind>(p.kind)) {
      case Kind::kDir: {
        struct stat st;
        ok = mkdir(t, p.mode) == 0 ? chmod(t, p.mode) == 0
                                   : (stat(t, &st) == 0 && S_ISDIR(st.st_mode));
        break;
      }
      case Kind::kFile: {
        struct stat st;
        if (lstat(t, &st) == 0) break;
        const int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, p.mode);
        ok = fd >= 0;
        if (ok) close(fd);
        break;
      }
      case Kind::kSymlink:
        ok = symlink(p.source.c_str(), t) == 0;
        break;
      case Kind::kBind:
        ok = mount(p.source.c_str(), t, nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
             (!p.read_only || MakeReadOnly(t, true));
        break;
      case Kind::kTmpfs:
        ok = mount("tmpfs", t, "tmpfs", MS_NOSUID | MS_NODEV, p.options.c_str()) == 0;
        break;
      case Kind::kProc:
        ok = mount("proc", t, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
        break;
      case Kind::kSysfs:
        ok = mount("sysfs", t, "sysfs",
                   MS_NOSUID | MS_NODEV | MS_NOEXEC | (p.read_only ? MS_RDONLY : 0), nullptr) == 0;
        break;
      case Kind::kReadOnly:
        ok = MakeReadOnly(t, true);
        break;
    }
    if (!ok) {
      WriteLine(p.what.c_str(), nullptr, errno);
      _exit(124);
    }
  }
  if (spec.read_only_root && !MakeReadOnly(root_dir.c_str(), false)) {
    WriteLine("make the new root read-only", nullptr, errno);
    _exit(124);
  }
  if (chdir(root_dir.c_str()) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
      umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    WriteLine("pivot_root to", root_dir.c_str(), errno);
    _exit(124);
  }
  if (spec.umask) ::umask(*spec.umask);
  if (spec.capabilities && !DropCapabilities(*spec.capabilities)) {
    WriteLine("drop capabilities", nullptr, errno);
    _exit(124);
  }
  if (spec.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    WriteLine("set no_new_privs", nullptr, errno);
    _exit(124);
  }
  ExecFirst(candidates, c_argv.data(), c_env.data());
  _exit(127);
}

SandboxProcess::~SandboxProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool SandboxProcess::Signal(int sig) { return pid_ > 0 && kill(pid_, sig) == 0; }

std::optional<int> SandboxProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

bool SandboxProcess::Exited() const {
  if (pid_ <= 0) return true;
  std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
  const std::string stat(std::istreambuf_iterator<char>(in), {});
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
}

std::string SandboxProcess::Log() const { return ReadFile(log_path_); }

CommandResult SandboxProcess::RunInside(const std::vector<std::string>& argv,
                                        absl::Duration timeout) {
  CommandResult result;
  const int ns_fd = open(absl::StrCat("/proc/", pid_, "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) {
    result.output =
        absl::StrCat("cannot open the mount namespace of pid ", pid_, ": ", strerror(errno));
    return result;
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(ns_fd);
    return result;
  }
  std::vector<std::string> arg_strings = argv;
  std::vector<char*> c_argv = CStrings(arg_strings);
  std::vector<std::string> env_strings = spec_.env;
  std::vector<char*> c_env = CStrings(env_strings);
  const std::vector<std::string> candidates = Candidates(argv.at(0), spec_.env);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  const pid_t child = fork();
  if (child == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(125);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
        dup2(out[1], STDERR_FILENO) < 0) {
      _exit(125);
    }
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // setns() of a mount namespace moves the root and working directory
    // to that namespace's root.
    if (setns(ns_fd, CLONE_NEWNS) != 0 || chdir("/") != 0) {
      WriteLine("setns", nullptr, errno);
      _exit(124);
    }
    if (spec_.capabilities && !DropCapabilities(*spec_.capabilities)) _exit(124);
    if (spec_.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(124);
    ExecFirst(candidates, c_argv.data(), c_env.data());
    _exit(127);
  }
  close(ns_fd);
  close(out[1]);
  if (null_fd >= 0) close(null_fd);
  if (child < 0) {
    close(out[0]);
    return result;
  }
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  if (timed_out) {
    absl::StrAppend(&result.output, "\n(killed after ", absl::FormatDuration(timeout), ")");
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

void AddHostSystem(SandboxSpec* spec,
                   const std::vector<std::pair<std::string, std::string>>& files) {
  std::set<std::string> usr_dirs_with_files;
  for (const auto& [from, at] : files) {
    absl::string_view rest = at;
    if (absl::ConsumePrefix(&rest, "/usr/")) {
      usr_dirs_with_files.emplace(rest.substr(0, rest.find('/')));
    }
  }
  auto add = [&](const std::string& host, const std::string& at) {
    struct stat st;
    if (lstat(host.c_str(), &st) != 0) return;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = readlink(host.c_str(), target, sizeof(target) - 1);
      if (n > 0) spec->Symlink(std::string(target, static_cast<size_t>(n)), at);
    } else if (S_ISDIR(st.st_mode)) {
      spec->Bind(host, at, /*read_only=*/true);
    }
  };
  for (const char* top : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    add(absl::StrCat("/", top), absl::StrCat("/", top));
  }
  spec->Dir("/usr");
  if (DIR* usr = opendir("/usr")) {
    while (dirent* e = readdir(usr)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (usr_dirs_with_files.count(name) != 0) {
        spec->Dir("/usr/" + name);
      } else {
        add("/usr/" + name, "/usr/" + name);
      }
    }
    closedir(usr);
  }
  for (const auto& [from, at] : files) spec->Bind(from, at, /*read_only=*/true);
}

void AddPrivateDev(SandboxSpec* spec) {
  spec->Tmpfs("/dev", "mode=0755,size=65536");
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    spec->Bind(absl::StrCat("/dev/", node), absl::StrCat("/dev/", node), /*read_only=*/false);
  }
}

std::optional<uint64_t> QuantityBytes(const std::string& quantity) {
  static const std::pair<const char*, uint64_t> kSuffixes[] = {
      {"Ki", uint64_t{1} << 10}, {"Mi", uint64_t{1} << 20}, {"Gi", uint64_t{1} << 30}, {"k", 1000},
      {"M", 1000 * 1000},        {"G", 1000 * 1000 * 1000}};
  absl::string_view number = quantity;
  uint64_t unit = 1;
  for (const auto& [suffix, bytes] : kSuffixes) {
    if (absl::ConsumeSuffix(&number, suffix)) {
      unit = bytes;
      break;
    }
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(number, &n)) return std::nullopt;
  return n * unit;
}

}  // namespace ringside::deploy_testing
