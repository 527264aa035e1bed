// `make install` and `make uninstall` into a DESTDIR: the files the README
// documents, with their modes, and nothing else; an edited config and
// recorded snapshots survive both.

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {
namespace {

// The directories install creates on the way, left in place by uninstall.
const std::map<std::string, std::string> kUsrParents = {
    {"etc", "d0755"},
    {"usr", "d0755"},
    {"usr/bin", "d0755"},
    {"usr/lib", "d0755"},
    {"usr/lib/systemd", "d0755"},
    {"usr/lib/systemd/system", "d0755"},
    {"var", "d0755"},
    {"var/lib", "d0755"},
};

class InstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(destdir_.path().empty());
    // The test runs make on the build it belongs to; a stale binary would
    // be rebuilt, which is not this test's job.
    const CommandResult fresh =
        RunShell(absl::StrCat("make -q BUILD=", BuildDir(), " ", BuildDir(), "/ringside"));
    if (fresh.exit_code != 0) {
      GTEST_SKIP() << BuildDir() << "/ringside is not up to date: run make first";
    }
  }

  CommandResult Make(const std::string& target, const std::string& prefix = "/usr") {
    const std::string prefix_arg = prefix.empty() ? "" : absl::StrCat(" PREFIX=", prefix);
    return RunShell(absl::StrCat("make --no-print-directory ", target, " BUILD=", BuildDir(),
                                 " DESTDIR=", destdir_.path(), prefix_arg));
  }

  std::string Dest(const std::string& rel) const { return destdir_.path() + "/" + rel; }

  TempDir destdir_;
};

TEST_F(InstallTest, LaysOutExactlyTheDocumentedFilesWithTheirModes) {
  const CommandResult r = Make("install");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::map<std::string, std::string> expected = kUsrParents;
  expected["usr/bin/ringside"] = "f0755";
  expected["usr/lib/systemd/system/ringside.service"] = "f0644";
  expected["usr/lib/ringside"] = "d0755";
  expected["usr/lib/ringside/ringside-ship"] = "f0755";
  expected["usr/lib/systemd/system/ringside-ship.service"] = "f0644";
  expected["usr/lib/systemd/system/ringside-ship.timer"] = "f0644";
  expected["etc/ringside"] = "d0755";
  expected["etc/ringside/agent.pbtxt"] = "f0644";
  expected["var/lib/ringside"] = "d0750";
  EXPECT_EQ(Tree(destdir_.path()), expected);

  EXPECT_EQ(ReadFile(Dest("usr/bin/ringside")), ReadFile(BuildDir() + "/ringside"));
  EXPECT_EQ(ReadFile(Dest("etc/ringside/agent.pbtxt")),
            ReadFile(SourceDir() + "/deploy/configs/agent.pbtxt"));
  const std::string unit = ReadFile(Dest("usr/lib/systemd/system/ringside.service"));
  EXPECT_EQ(UnitValues(unit, "ExecStart"),
            std::vector<std::string>{"/usr/bin/ringside agent -c /etc/ringside/agent.pbtxt"});
  EXPECT_FALSE(absl::StrContains(unit, "@BINDIR@"));
  EXPECT_EQ(ReadFile(Dest("usr/lib/ringside/ringside-ship")),
            ReadFile(SourceDir() + "/deploy/shipping/ringside-ship"));
  const std::string ship = ReadFile(Dest("usr/lib/systemd/system/ringside-ship.service"));
  EXPECT_EQ(UnitValues(ship, "ExecStart"),
            std::vector<std::string>{"/usr/lib/ringside/ringside-ship /var/lib/ringside/snapshots "
                                     "${RINGSIDE_SHIP_TO} --log-level NOTICE"});
}

TEST_F(InstallTest, DefaultPrefixPutsTheUnitWhereSystemdLooksForLocalUnits) {
  const CommandResult r = Make("install", /*prefix=*/"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<std::string, std::string> tree = Tree(destdir_.path());
  EXPECT_EQ(tree.count("usr/local/bin/ringside"), 1u);
  ASSERT_EQ(tree.count("usr/local/lib/systemd/system/ringside.service"), 1u);
  EXPECT_EQ(tree.count("etc/ringside/agent.pbtxt"), 1u);
  EXPECT_EQ(
      UnitValues(ReadFile(Dest("usr/local/lib/systemd/system/ringside.service")), "ExecStart"),
      std::vector<std::string>{"/usr/local/bin/ringside agent -c /etc/ringside/agent.pbtxt"});
}

TEST_F(InstallTest, ASecondInstallKeepsAnEditedConfigAndSaysSo) {
  ASSERT_EQ(Make("install").exit_code, 0);
  const std::string edited = "# mine\n" + ReadFile(Dest("etc/ringside/agent.pbtxt"));
  WriteFile(Dest("etc/ringside/agent.pbtxt"), edited);

  const CommandResult r = Make("install");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadFile(Dest("etc/ringside/agent.pbtxt")), edited);
  EXPECT_TRUE(absl::StrContains(r.output, "keeping " + Dest("etc/ringside/agent.pbtxt")))
      << r.output;
}

TEST_F(InstallTest, UninstallRemovesExactlyWhatInstallAdded) {
  // Something of someone else's beside ours stays.
  ASSERT_EQ(
      RunShell(absl::StrCat("mkdir -p ", Dest("usr/bin"), " && touch ", Dest("usr/bin/other")))
          .exit_code,
      0);
  ASSERT_EQ(Make("install").exit_code, 0);
  const CommandResult r = Make("uninstall");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::map<std::string, std::string> expected = kUsrParents;
  expected["usr/bin/other"] = "f0644";
  std::map<std::string, std::string> tree = Tree(destdir_.path());
  tree["usr/bin/other"] = "f0644";  // Its mode is the umask's, not ours.
  EXPECT_EQ(tree, expected);
}

TEST_F(InstallTest, UninstallKeepsAChangedConfigAndRecordedSnapshots) {
  ASSERT_EQ(Make("install").exit_code, 0);
  WriteFile(Dest("etc/ringside/agent.pbtxt"), "buffers { size_kb: 1024 }\n");
  ASSERT_EQ(RunShell(absl::StrCat("mkdir ", Dest("var/lib/ringside/snapshots"))).exit_code, 0);
  WriteFile(Dest("var/lib/ringside/snapshots/host-20250101T000000Z-oom_kill.pftrace"), "trace");

  const CommandResult r = Make("uninstall");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<std::string, std::string> tree = Tree(destdir_.path());
  EXPECT_EQ(tree.count("usr/bin/ringside"), 0u);
  EXPECT_EQ(tree.count("usr/lib/systemd/system/ringside.service"), 0u);
  EXPECT_EQ(ReadFile(Dest("etc/ringside/agent.pbtxt")), "buffers { size_kb: 1024 }\n");
  EXPECT_EQ(ReadFile(Dest("var/lib/ringside/snapshots/host-20250101T000000Z-oom_kill.pftrace")),
            "trace");
  EXPECT_TRUE(absl::StrContains(r.output, "keeping " + Dest("etc/ringside/agent.pbtxt")))
      << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "keeping " + Dest("var/lib/ringside"))) << r.output;
}

TEST_F(InstallTest, UninstallRemovesAnUnchangedConfigAndEmptyStateDirectories) {
  ASSERT_EQ(Make("install").exit_code, 0);
  // The agent made its snapshot directory and never wrote a snapshot.
  ASSERT_EQ(RunShell(absl::StrCat("mkdir ", Dest("var/lib/ringside/snapshots"))).exit_code, 0);
  ASSERT_EQ(Make("uninstall").exit_code, 0);
  const std::map<std::string, std::string> tree = Tree(destdir_.path());
  EXPECT_EQ(tree.count("etc/ringside"), 0u);
  EXPECT_EQ(tree.count("var/lib/ringside"), 0u);
}

}  // namespace
}  // namespace ringside::deploy_testing
