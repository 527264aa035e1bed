#ifndef RINGSIDE_TESTS_DEPLOY_TESTING_SANDBOX_H_
#define RINGSIDE_TESTS_DEPLOY_TESTING_SANDBOX_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {

// The filesystem a program is started in, as a container runtime or
// systemd builds it: a fresh root (a tmpfs, `root_dir` on the host) filled
// by mounts and files in order, then made the process's root with
// pivot_root. Everything happens in a mount namespace of the child's own,
// made private first, so the host sees none of it and it all goes when the
// last process in it ends. Needs root (CAP_SYS_ADMIN).
class SandboxSpec {
 public:
  // Paths (`at`) are inside the new root, absolute. Each call adds one step;
  // missing directories on the way to `at` are created (mode 0755) first,
  // and the mount point itself (a directory, or an empty file when the
  // source is not a directory).
  void Dir(const std::string& at, mode_t mode = 0755);
  void Symlink(const std::string& link_target, const std::string& at);
  // A bind mount of `host_path`, with every mount below it; made read-only
  // (all of them) when `read_only`.
  void Bind(const std::string& host_path, const std::string& at, bool read_only);
  // `options` as mount(8) takes them: "mode=0777,size=1048576".
  void Tmpfs(const std::string& at, const std::string& options);
  void Proc(const std::string& at);
  void Sysfs(const std::string& at, bool read_only);
  // Makes the mount at `at` and every mount below it read-only.
  void ReadOnly(const std::string& at);

  // Mounts tracefs on the host's /sys/kernel/tracing inside the namespace
  // when it is not mounted there, before any step: what systemd's
  // sys-kernel-tracing.mount does on a node, which a Bind of that path
  // then passes on.
  bool host_tracefs = false;
  // The new root (its tmpfs) is made read-only after the last step; the
  // mounts on it keep their own flags.
  bool read_only_root = false;
  // A network namespace of its own (systemd's PrivateNetwork=yes).
  bool private_network = false;
  // A UTS namespace of its own with this host name, as a pod has (its
  // name); "": the machine's.
  std::string hostname;
  // Capabilities kept in the bounding set (a mask of 1 << CAP_*); the
  // program runs as root, so it gets exactly these. nullopt: all.
  std::optional<uint64_t> capabilities;
  bool no_new_privs = false;
  std::optional<mode_t> umask;
  // The environment; PATH in it is where a relative argv[0] is looked up,
  // inside the new root.
  std::vector<std::string> env;

 private:
  friend class SandboxProcess;
  enum class Kind { kDir, kFile, kSymlink, kBind, kTmpfs, kProc, kSysfs, kReadOnly };
  struct Step {
    Kind kind;
    std::string at;
    std::string source;   // kBind: the host path; kSymlink: its target.
    std::string options;  // kTmpfs.
    mode_t mode = 0755;   // kDir.
    bool read_only = false;
  };
  void Parents(const std::string& at);
  std::vector<Step> steps_;
};

// A program started in a sandbox (SandboxSpec), its stdout and stderr
// into `log_path`; killed (SIGKILL) by the destructor if still running,
// and killed with the test process if that dies first.
class SandboxProcess {
 public:
  // `root_dir`: an empty directory of the test's, where the new root is
  // built (only inside the namespace). `argv[0]`: a path inside the new
  // root, or a name looked up on the spec's PATH there.
  SandboxProcess(const SandboxSpec& spec, const std::string& root_dir,
                 const std::vector<std::string>& argv, const std::string& log_path);
  ~SandboxProcess();
  SandboxProcess(const SandboxProcess&) = delete;
  SandboxProcess& operator=(const SandboxProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Signal(int sig);
  // The wait status once it exited, within `timeout`; nullopt if it did not.
  std::optional<int> WaitExit(absl::Duration timeout);
  // True once it exited (a zombie still to reap, or reaped).
  bool Exited() const;
  // What it wrote so far.
  std::string Log() const;
  // Runs `argv` beside it, as `kubectl exec` or an admin on the node would:
  // in its mount namespace (so its root), with the spec's environment and
  // capabilities; killed after `timeout`.
  CommandResult RunInside(const std::vector<std::string>& argv, absl::Duration timeout);

 private:
  SandboxSpec spec_;
  pid_t pid_ = -1;
  std::string log_path_;
};

// The host's operating system as a Debian image or a machine's root has it,
// read-only: the merged-/usr links (or directories) and /usr, with `files`
// (host path, path in the new root) placed in it. A directory of /usr that
// gets one of them holds only those: the programs under test run nothing
// else from it.
void AddHostSystem(SandboxSpec* spec,
                   const std::vector<std::pair<std::string, std::string>>& files);
// A /dev of its own with the devices a container runtime or systemd's
// PrivateDevices=yes gives (null, zero, full, random, urandom, tty).
void AddPrivateDev(SandboxSpec* spec);

// "1Mi", "64Ki", "2G", "512" (a Kubernetes quantity of bytes): the bytes;
// nullopt if it is not one of those forms.
std::optional<uint64_t> QuantityBytes(const std::string& quantity);

}  // namespace ringside::deploy_testing

#endif  // RINGSIDE_TESTS_DEPLOY_TESTING_SANDBOX_H_
