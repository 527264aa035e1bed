#include "agent/output/output_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

TEST(OutputDirTest, MakesEveryMissingLevel0750OfTheGroupAndHoldsTheLast) {
  ScratchDir dir;
  const std::string path = dir.Join("a/b/c");
  absl::StatusOr<std::unique_ptr<OutputDir>> out = OutputDir::Open(path + "/", gid_t{4});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->path(), path + "/");
  for (const std::string& level : {dir.Join("a"), dir.Join("a/b"), path}) {
    EXPECT_TRUE(S_ISDIR(ModeOf(level))) << level;
    EXPECT_EQ(ModeOf(level) & 07777, 0750u) << level;
    struct stat st;
    ASSERT_EQ(stat(level.c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, 4u) << level;
  }
  // The descriptor is the directory's, whatever its path becomes.
  ASSERT_EQ(rename(path.c_str(), dir.Join("moved").c_str()), 0);
  const int fd = openat((*out)->fd(), "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_TRUE(S_ISREG(ModeOf(dir.Join("moved/f"))));
}

TEST(OutputDirTest, ADirectoryThatExistsKeepsItsOwnerAndMode) {
  ScratchDir dir;
  const std::string path = dir.Join("kept");
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
  absl::StatusOr<std::unique_ptr<OutputDir>> out = OutputDir::Open(path, gid_t{4});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ModeOf(path) & 07777, 0700u);
}

TEST(OutputDirTest, RefusesWhatIsNotADirectoryOfOursAloneNamingIt) {
  ScratchDir dir;
  ASSERT_EQ(mkdir(dir.Join("open").c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.Join("open").c_str(), 0757), 0);
  ASSERT_EQ(symlink(dir.path().c_str(), dir.Join("link").c_str()), 0);
  close(open(dir.Join("file").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  struct Case {
    std::string path;
    std::string says;
  };
  for (const Case& c :
       {Case{dir.Join("open"), "can be written by others (mode 0757)"},
        Case{dir.Join("link"), "is a symlink"}, Case{dir.Join("file"), "is not a directory"},
        Case{dir.Join("file/below"), "above it is not a directory"}}) {
    absl::StatusOr<std::unique_ptr<OutputDir>> out = OutputDir::Open(c.path, std::nullopt);
    ASSERT_FALSE(out.ok()) << c.path;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_TRUE(absl::StrContains(out.status().message(), c.says)) << out.status();
  }
}

}  // namespace
}  // namespace ringside::agent
