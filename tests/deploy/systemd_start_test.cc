// deploy/systemd/ringside.service started the way systemd would start it
// after `make install PREFIX=/usr`: the installed unit's ExecStart= command
// line, in the filesystem its settings make, with its capabilities,
// no_new_privs, umask and network namespace, until the agent sends READY=1
// on the notify socket; then `ringside status` answers, and SIGTERM stops
// it with STOPPING=1 and exit status 0 within TimeoutStopSec=.
//
// systemd is not pid 1 here and the unit is never installed on this
// machine: tests/deploy/testing/sandbox.h builds what the unit's settings
// ask for in a mount namespace of the agent's own:
//   - the machine: its /usr (read-only) with the files the command line
//     names (the binary, the config) from the install, /proc and /sys as
//     they are, tracefs at /sys/kernel/tracing (sys-kernel-tracing.mount);
//   - ProtectSystem=strict: everything read-only but /dev, /proc, /sys and
//     the unit's own directories; ProtectControlGroups=: /sys/fs/cgroup
//     read-only; PrivateDevices=, PrivateTmp=, ProtectHome=;
//   - RuntimeDirectory= in a /run of its own (never this machine's
//     /run/ringside) and StateDirectory= in a scratch directory, each with
//     its unit's mode, writable.
// Not simulated: the seccomp filters (SystemCallArchitectures=,
// RestrictAddressFamilies=, RestrictNamespaces=, ...), resource limits and
// cgroup budgets, the watchdog's enforcement.

#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/testing/deploy_files.h"
#include "tests/deploy/testing/notify_socket.h"
#include "tests/deploy/testing/sandbox.h"

namespace ringside::deploy_testing {
namespace {

// systemd's PATH for services (systemd 252, no /usr/local/sbin split).
constexpr char kServicePath[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";

std::string OnlyValue(const std::string& unit, const std::string& key) {
  const std::vector<std::string> values = UnitValues(unit, key);
  EXPECT_EQ(values.size(), 1u) << key;
  return values.empty() ? "" : values.back();
}

// "30s", "2min", "1h", plain seconds: as systemd reads a time span.
absl::Duration Seconds(const std::string& span) {
  absl::string_view v = span;
  int64_t unit_s = 1;
  if (absl::ConsumeSuffix(&v, "min")) {
    unit_s = 60;
  } else if (absl::ConsumeSuffix(&v, "h")) {
    unit_s = 3600;
  } else {
    absl::ConsumeSuffix(&v, "s");
  }
  int64_t n = 0;
  EXPECT_TRUE(absl::SimpleAtoi(v, &n)) << span;
  return absl::Seconds(n * unit_s);
}

mode_t Mode(const std::string& octal) {
  char* end = nullptr;
  const unsigned long mode = strtoul(octal.c_str(), &end, 8);
  EXPECT_TRUE(!octal.empty() && *end == '\0' && mode <= 07777) << octal;
  return static_cast<mode_t>(mode);
}

std::optional<int> CapabilityNumber(absl::string_view name) {
  static const std::pair<const char*, int> kCaps[] = {{"CAP_CHOWN", CAP_CHOWN},
                                                      {"CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE},
                                                      {"CAP_SYS_ADMIN", CAP_SYS_ADMIN},
                                                      {"CAP_SYS_RESOURCE", CAP_SYS_RESOURCE},
                                                      {"CAP_IPC_LOCK", CAP_IPC_LOCK},
                                                      {"CAP_PERFMON", CAP_PERFMON},
                                                      {"CAP_BPF", CAP_BPF}};
  for (const auto& [n, cap] : kCaps) {
    if (name == n) return cap;
  }
  return std::nullopt;
}

class SystemdStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: mount namespaces, mounts, pivot_root";
    if (RunShell(absl::StrCat("make -q BUILD=", BuildDir(), " ", BuildDir(), "/ringside"))
            .exit_code != 0) {
      GTEST_SKIP() << BuildDir() << "/ringside is not up to date: run make first";
    }
    const CommandResult install =
        RunShell(absl::StrCat("make --no-print-directory install BUILD=", BuildDir(),
                              " PREFIX=/usr DESTDIR=", Scratch("dest")));
    ASSERT_EQ(install.exit_code, 0) << install.output;
    unit_ = ReadFile(Scratch("dest") + "/usr/lib/systemd/system/ringside.service");
    ASSERT_FALSE(unit_.empty());
  }

  std::string Scratch(const std::string& name) {
    const std::string path = scratch_.path() + "/" + name;
    std::filesystem::create_directories(path);
    return path;
  }

  // ExecStart= as words; systemd's quoting and specifiers are not
  // simulated, so the unit must not use them.
  std::vector<std::string> ExecStart() {
    const std::string line = OnlyValue(unit_, "ExecStart");
    EXPECT_FALSE(absl::StrContains(line, "\"") || absl::StrContains(line, "'") ||
                 absl::StrContains(line, "%") || absl::StrContains(line, "$"))
        << "ExecStart=" << line << ": quoting and specifiers are not simulated";
    return absl::StrSplit(line, ' ', absl::SkipEmpty());
  }

  // The service's filesystem and privileges as the unit's settings make
  // them; `notify` is bound at /run/systemd/notify.
  SandboxSpec ServiceSandbox(const std::vector<std::string>& command, const std::string& notify) {
    SandboxSpec spec;
    EXPECT_EQ(OnlyValue(unit_, "ProtectSystem"), "strict");
    spec.read_only_root = true;
    // The installed files the command line names.
    std::vector<std::pair<std::string, std::string>> files;
    for (const std::string& word : command) {
      const std::string installed = Scratch("dest") + word;
      if (absl::StartsWith(word, "/") && std::filesystem::is_regular_file(installed)) {
        files.emplace_back(installed, word);
      }
    }
    EXPECT_EQ(files.size(), 2u) << "the binary and its config, from the install";
    for (const char* dir : {"/etc", "/var/lib", "/mnt", "/srv", "/opt"}) spec.Dir(dir);
    AddHostSystem(&spec, files);
    // API filesystems: writable under strict.
    spec.host_tracefs = true;
    spec.Bind("/proc", "/proc", /*read_only=*/false);
    spec.Bind("/sys", "/sys", /*read_only=*/false);
    if (OnlyValue(unit_, "ProtectControlGroups") == "yes") spec.ReadOnly("/sys/fs/cgroup");
    if (OnlyValue(unit_, "PrivateDevices") == "yes") {
      AddPrivateDev(&spec);
    } else {
      spec.Bind("/dev", "/dev", /*read_only=*/false);
    }
    if (OnlyValue(unit_, "PrivateTmp") == "yes") {
      spec.Tmpfs("/tmp", "mode=01777");
      spec.Tmpfs("/var/tmp", "mode=01777");
    }
    EXPECT_TRUE(UnitValues(unit_, "ReadWritePaths").empty()) << "not simulated";
    // The machine's /run (a tmpfs), read-only like the rest, with the
    // notify socket and the RuntimeDirectory= (made with its mode, root's,
    // writable).
    spec.Tmpfs("/run", "mode=0755");
    const std::string runtime_dir = Scratch("run-" + OnlyValue(unit_, "RuntimeDirectory"));
    chmod(runtime_dir.c_str(), Mode(OnlyValue(unit_, "RuntimeDirectoryMode")));
    const std::string state_dir = Scratch("state-" + OnlyValue(unit_, "StateDirectory"));
    chmod(state_dir.c_str(), Mode(OnlyValue(unit_, "StateDirectoryMode")));
    spec.Dir("/run/systemd");
    spec.Bind(notify, "/run/systemd/notify", /*read_only=*/false);
    spec.Dir("/run/" + OnlyValue(unit_, "RuntimeDirectory"));
    if (OnlyValue(unit_, "ProtectHome") == "yes") {
      for (const char* dir : {"/home", "/root", "/run/user"}) spec.Dir(dir, 0);
    }
    spec.ReadOnly("/run");
    spec.Bind(runtime_dir, "/run/" + OnlyValue(unit_, "RuntimeDirectory"), /*read_only=*/false);
    spec.Bind(state_dir, "/var/lib/" + OnlyValue(unit_, "StateDirectory"), /*read_only=*/false);

    uint64_t caps = 0;
    for (absl::string_view name :
         absl::StrSplit(OnlyValue(unit_, "CapabilityBoundingSet"), ' ', absl::SkipEmpty())) {
      const std::optional<int> cap = CapabilityNumber(name);
      if (cap) {
        caps |= uint64_t{1} << *cap;
      } else {
        ADD_FAILURE() << "capability " << name << " is not known to this test";
      }
    }
    spec.capabilities = caps;
    spec.no_new_privs = OnlyValue(unit_, "NoNewPrivileges") == "yes";
    spec.umask = Mode(OnlyValue(unit_, "UMask"));
    spec.private_network = OnlyValue(unit_, "PrivateNetwork") == "yes";
    spec.env = {kServicePath, "NOTIFY_SOCKET=/run/systemd/notify"};
    EXPECT_EQ(OnlyValue(unit_, "Type"), "notify");
    spec.env.push_back(absl::StrCat(
        "WATCHDOG_USEC=", absl::ToInt64Microseconds(Seconds(OnlyValue(unit_, "WatchdogSec")))));
    return spec;
  }

  TempDir scratch_;
  std::string unit_;
};

TEST_F(SystemdStartTest, AgentStartsAsTheUnitsServiceAndStopsOnSigterm) {
  const std::vector<std::string> command = ExecStart();
  ASSERT_FALSE(command.empty());
  NotifySocket notify(Scratch("systemd") + "/notify");
  ASSERT_TRUE(notify.ok()) << notify.path();
  const SandboxSpec spec = ServiceSandbox(command, notify.path());
  ASSERT_FALSE(HasFailure());
  SandboxProcess agent(spec, Scratch("root"), command, Scratch("logs") + "/agent.log");

  // systemd's start timeout (TimeoutStartSec= is not set: 90 s).
  const bool ready = notify.WaitFor("READY=1", absl::Seconds(90), [&] { return agent.Exited(); });
  ASSERT_TRUE(ready) << (agent.Exited() ? "the agent exited before READY=1" : "no READY=1")
                     << "; its log:\n"
                     << agent.Log();

  // `ringside status` as the unit's header shows it, over
  // /run/ringside/control.sock.
  const CommandResult status = agent.RunInside({"ringside", "status"}, absl::Seconds(10));
  EXPECT_EQ(status.exit_code, 0) << status.output << "\nthe agent's log:\n" << agent.Log();
  // Started whole: with the unit's capabilities and paths, no data source
  // was left out (the agent degrades rather than fails).
  const CommandResult status_json =
      agent.RunInside({"ringside", "status", "--json"}, absl::Seconds(10));
  ASSERT_EQ(status_json.exit_code, 0) << status_json.output;
  const nlohmann::json sources =
      nlohmann::json::parse(status_json.output, nullptr, /*allow_exceptions=*/false)["sources"];
  ASSERT_TRUE(sources.is_array() && !sources.empty()) << status_json.output;
  for (const nlohmann::json& source : sources) {
    EXPECT_EQ(source.value("state", ""), "RUNNING") << source << "\nthe agent's log:\n"
                                                    << agent.Log();
    EXPECT_EQ(source.value("error", ""), "") << source;
  }

  ASSERT_TRUE(agent.Signal(SIGTERM));
  const std::optional<int> exit = agent.WaitExit(Seconds(OnlyValue(unit_, "TimeoutStopSec")));
  ASSERT_TRUE(exit.has_value()) << "not stopped within TimeoutStopSec=; log:\n" << agent.Log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << "wait status " << *exit << "; log:\n"
                                                           << agent.Log();
  EXPECT_TRUE(notify.WaitFor("STOPPING=1", absl::Seconds(1), nullptr));
}

}  // namespace
}  // namespace ringside::deploy_testing
