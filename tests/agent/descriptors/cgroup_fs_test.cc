#include "agent/descriptors/cgroup_fs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/scratch_cgroup.h"

namespace ringside::agent {
namespace {

TEST(CgroupFsTest, TheV2LineOfAHybridProcFile) {
  EXPECT_EQ(CgroupPathInProcFile("12:memory:/user.slice\n1:name=systemd:/user.slice/x.scope\n"
                                 "0::/user.slice/user-0.slice/session-3.scope\n"),
            "/user.slice/user-0.slice/session-3.scope");
  EXPECT_EQ(CgroupPathInProcFile("0::/\n"), "/");
  EXPECT_EQ(CgroupPathInProcFile("0::/gone.scope (deleted)\n"), "/gone.scope");
}

TEST(CgroupFsTest, NoV2LineOrABadOneIsNoPath) {
  EXPECT_EQ(CgroupPathInProcFile(""), std::nullopt);
  EXPECT_EQ(CgroupPathInProcFile("12:memory:/user.slice\n"), std::nullopt);
  EXPECT_EQ(CgroupPathInProcFile("0::\n"), std::nullopt);
  EXPECT_EQ(CgroupPathInProcFile("0::relative\n"), std::nullopt);
  EXPECT_EQ(CgroupPathInProcFile(std::string("0::\0/x\n", 7)), std::nullopt);
}

TEST(CgroupFsTest, PathsWithDotDotOrNotAbsoluteHaveNoId) {
  EXPECT_EQ(CgroupIdOfPath(""), std::nullopt);
  EXPECT_EQ(CgroupIdOfPath("system.slice"), std::nullopt);
  EXPECT_EQ(CgroupIdOfPath("/.."), std::nullopt);
  EXPECT_EQ(CgroupIdOfPath("/system.slice/../.."), std::nullopt);
}

// This process's own cgroup, on the real hierarchy: its id is its
// directory's inode, and the walk finds it with that id.
TEST(CgroupFsTest, ThisProcessesCgroupHasTheIdTheWalkFinds) {
  if (Cgroup2Mount().empty()) GTEST_SKIP() << "no cgroup2 mount in /proc/self/mounts";
  const std::optional<std::string> path = CgroupPathOfPid(getpid());
  ASSERT_TRUE(path.has_value());
  const std::optional<uint64_t> id = CgroupIdOfPath(*path);
  ASSERT_TRUE(id.has_value()) << *path;
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat(Cgroup2Mount(), *path).c_str(), &st), 0);
  EXPECT_EQ(*id, st.st_ino);
  std::set<std::string> seen;
  bool found = false;
  EXPECT_TRUE(ForEachCgroup(
      [&](const std::string& p, uint64_t i) {
        EXPECT_TRUE(seen.insert(p).second) << p;
        if (p == *path) found = i == *id;
      },
      1 << 20));
  EXPECT_TRUE(seen.count("/"));
  EXPECT_TRUE(found) << *path;
}

TEST(CgroupFsTest, TheWalkFindsACgroupWithItsIdAndStopsAtItsLimit) {
  testing::ScratchCgroup cgroup("walk-me");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  EXPECT_EQ(CgroupIdOfPath(cgroup.path()), cgroup.id());
  bool found = false;
  EXPECT_TRUE(ForEachCgroup(
      [&](const std::string& p, uint64_t id) {
        if (p == cgroup.path()) found = id == cgroup.id();
      },
      1 << 20));
  EXPECT_TRUE(found) << cgroup.path();
  int visited = 0;
  EXPECT_FALSE(ForEachCgroup([&](const std::string&, uint64_t) { visited++; }, 2));
  EXPECT_EQ(visited, 2);
}

// Paths a cgroup namespace shows, joined to its root below the mount.
TEST(CgroupFsTest, NamespacePathsJoinTheirRoot) {
  const std::string root = "/kubepods.slice/kubepods-burstable.slice/pod-x.slice/agent.scope";
  EXPECT_EQ(JoinCgroupPath(root, "/"), root);
  EXPECT_EQ(JoinCgroupPath(root, "/child"), root + "/child");
  EXPECT_EQ(JoinCgroupPath(root, "/../../pod-y.slice/db.scope"),
            "/kubepods.slice/kubepods-burstable.slice/pod-y.slice/db.scope");
  EXPECT_EQ(JoinCgroupPath(root, "/../../../../init.scope"), "/init.scope");
  EXPECT_EQ(JoinCgroupPath(root, "/../../../../../../.."), "/");  // Never above the root.
  EXPECT_EQ(JoinCgroupPath("/", "/system.slice"), "/system.slice");
}

// This machine's tests run in its own cgroup namespace: paths are the
// mount's as they are.
TEST(CgroupFsTest, InTheNodesNamespacePathsAreUnchanged) {
  std::optional<std::string> init;
  std::ifstream in("/proc/1/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  init = CgroupPathInProcFile(text.str());
  if (!init.has_value() || absl::StartsWith(*init, "/..")) {
    GTEST_SKIP() << "this process has a cgroup namespace of its own";
  }
  EXPECT_EQ(CgroupNamespaceRoot(), std::optional<std::string>("/"));
  EXPECT_EQ(CgroupPathBelowMount("/system.slice/x.service"), "/system.slice/x.service");
}

}  // namespace
}  // namespace ringside::agent
