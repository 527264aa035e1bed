// deploy/shipping/ringside-ship.service run the way systemd would run it
// (as systemd_start_test.cc runs the agent's unit, with
// tests/deploy/testing/sandbox.h): root without capabilities, no_new_privs,
// in the filesystem its settings make:
//   - ProtectSystem=strict: this machine's /usr and /etc read-only, and the
//     ReadWritePaths= (the agent's output_dir, a scratch directory here)
//     writable; ProtectHome=, PrivateTmp=, PrivateDevices=;
//   - InaccessiblePaths=: each path of it that exists on this machine
//     covered, read-only, by an empty file or directory of mode 0000, as
//     systemd covers them with its own (/run/systemd/inaccessible/).
// rclone is a stand-in that tries to read what the unit hides, as a
// compromised rclone (or a remote's exploit of it) would. The script is run
// from a scratch path, not the unit's @SHIPDIR@: placing a file into this
// machine's /usr is not something a test may do.
// Not simulated: the seccomp filters (RestrictAddressFamilies=), Nice=.

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"
#include "tests/deploy/testing/deploy_files.h"
#include "tests/deploy/testing/sandbox.h"

namespace ringside::deploy_testing {
namespace {

constexpr char kServicePath[] = "PATH=/opt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";
// What the stand-in tries to read: the unit hides each of them.
constexpr const char* kSecrets[] = {"/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers"};

class ShippingUnitStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: mount namespaces, mounts, pivot_root";
    unit_ = ReadFile(SourceDir() + "/deploy/shipping/ringside-ship.service");
    ASSERT_FALSE(unit_.empty());
  }

  std::string Scratch(const std::string& name) {
    const std::string path = scratch_.path() + "/" + name;
    std::filesystem::create_directories(path);
    return path;
  }

  // The unit's filesystem and privileges; `hide`: apply InaccessiblePaths=.
  SandboxSpec ServiceSandbox(bool hide) {
    SandboxSpec spec;
    EXPECT_EQ(UnitValues(unit_, "ProtectSystem"), std::vector<std::string>{"strict"});
    spec.read_only_root = true;
    for (const char* dir : {"/var/lib", "/opt/bin"}) spec.Dir(dir);
    AddHostSystem(&spec, {});
    spec.Bind("/etc", "/etc", /*read_only=*/true);
    spec.Bind(SourceDir() + "/deploy/shipping/ringside-ship", "/opt/ringside-ship", true);
    spec.Bind(StandIn(), "/opt/bin/rclone", /*read_only=*/true);
    spec.Proc("/proc");
    AddPrivateDev(&spec);
    spec.Tmpfs("/tmp", "mode=01777");
    spec.Tmpfs("/run", "mode=0755");
    for (const char* dir : {"/home", "/root", "/run/user"}) spec.Dir(dir, 0);
    for (const std::string& path : UnitValues(unit_, "ReadWritePaths")) {
      spec.Bind(Scratch("rw" + path), path, /*read_only=*/false);
    }
    if (hide) {
      const std::string empty_dir = Scratch("inaccessible/dir");
      chmod(empty_dir.c_str(), 0);
      const std::string empty_file = scratch_.path() + "/inaccessible/file";
      WriteFile(empty_file, "");
      chmod(empty_file.c_str(), 0);
      for (const std::string& value : UnitValues(unit_, "InaccessiblePaths")) {
        for (absl::string_view word : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
          const std::string path(absl::StripPrefix(word, "-"));
          std::error_code error;
          const std::filesystem::file_status st = std::filesystem::symlink_status(path, error);
          if (error || !std::filesystem::exists(st)) continue;  // "-": nothing to hide.
          spec.Bind(std::filesystem::is_directory(st) ? empty_dir : empty_file, path, true);
        }
      }
    }
    EXPECT_EQ(UnitValues(unit_, "CapabilityBoundingSet"), std::vector<std::string>{""});
    spec.capabilities = 0;
    spec.no_new_privs = UnitValues(unit_, "NoNewPrivileges") == std::vector<std::string>{"yes"};
    spec.env = {kServicePath, "RCLONE_CONFIG=/dev/null"};
    return spec;
  }

  // rclone's stand-in: says which secrets it could read, and fails (so the
  // script puts its files back).
  std::string StandIn() {
    const std::string path = Scratch("bin") + "/rclone";
    std::string script = "#!/bin/sh\n";
    for (const char* secret : kSecrets) {
      // A file's contents, a directory's list.
      absl::StrAppend(&script, "if { { [ -d ", secret, " ] && ls ", secret, "; } || { [ -f ",
                      secret, " ] && cat ", secret,
                      "; }; } >/dev/null 2>&1; then echo 'read: ", secret, "'; fi\n");
    }
    absl::StrAppend(&script, "echo 'rclone: stand-in ran'; exit 1\n");
    WriteFile(path, script);
    chmod(path.c_str(), 0755);
    return path;
  }

  // ExecStart= with the script where this test put it and the destination.
  std::vector<std::string> Command() {
    const std::vector<std::string> exec = UnitValues(unit_, "ExecStart");
    EXPECT_EQ(exec.size(), 1u);
    std::vector<std::string> words =
        absl::StrSplit(exec.empty() ? "" : exec[0], ' ', absl::SkipEmpty());
    for (std::string& w : words) {
      w = absl::StrReplaceAll(w, {{"@SHIPDIR@/ringside-ship", "/opt/ringside-ship"},
                                  {"${RINGSIDE_SHIP_TO}", "remote:node-7"}});
    }
    return words;
  }

  // One run; what it printed.
  std::string Run(bool hide) {
    const std::string output_dir = agent::DefaultAgentConfig().output_dir();
    const std::string node_dir = Scratch("rw" + output_dir);
    WriteFile(node_dir + "/h-20261127T101500Z-crash.pftrace", "trace");
    WriteFile(node_dir + "/h-20261127T101500Z-crash.pftrace.json", "{}");
    const SandboxSpec spec = ServiceSandbox(hide);
    SandboxProcess ship(spec, Scratch(hide ? "root-hidden" : "root-open"), Command(),
                        Scratch("logs") + (hide ? "/hidden.log" : "/open.log"));
    const std::optional<int> status = ship.WaitExit(absl::Seconds(60));
    EXPECT_TRUE(status.has_value()) << ship.Log();
    return ship.Log();
  }

  TempDir scratch_;
  std::string unit_;
};

TEST_F(ShippingUnitStartTest, RcloneReadsNoneOfTheMachinesSecrets) {
  const std::string log = Run(/*hide=*/true);
  ASSERT_TRUE(absl::StrContains(log, "rclone: stand-in ran")) << log;
  for (const char* secret : kSecrets) {
    EXPECT_FALSE(absl::StrContains(log, absl::StrCat("read: ", secret))) << log;
  }
  // Its files back where the agent's retention counts them.
  const std::string node_dir = Scratch("rw" + agent::DefaultAgentConfig().output_dir());
  EXPECT_TRUE(std::filesystem::exists(node_dir + "/h-20261127T101500Z-crash.pftrace")) << log;
}

TEST_F(ShippingUnitStartTest, WithoutInaccessiblePathsRootWithoutCapabilitiesReadsThem) {
  // The check above can fail: the same sandbox without the hiding reads
  // /etc/shadow, where root owns it and may read it (Debian's 0640).
  struct stat st;
  if (stat("/etc/shadow", &st) != 0 || st.st_uid != 0 || (st.st_mode & S_IRUSR) == 0) {
    GTEST_SKIP() << "this machine's /etc/shadow is not readable to its owner, root";
  }
  const std::string log = Run(/*hide=*/false);
  EXPECT_TRUE(absl::StrContains(log, "read: /etc/shadow")) << log;
}

}  // namespace
}  // namespace ringside::deploy_testing
