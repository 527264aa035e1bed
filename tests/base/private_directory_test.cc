// base/private_directory.h: a directory the agent creates files in by name
// must be its own and writable by nobody else, and the refusal says which
// directory, why, and which setting chooses another.
#include "base/private_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "base/scoped_fd.h"
#include "gtest/gtest.h"

namespace ringside::base {
namespace {

class PrivateDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/private_directory_test.XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    dir_ = name;
  }
  void TearDown() override { rmdir(dir_.c_str()); }

  ScopedFd Open() { return ScopedFd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); }

  std::string dir_;
};

TEST_F(PrivateDirectoryTest, OwnDirectoryWritableByNobodyElsePasses) {
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ScopedFd fd = Open();
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(CheckOnlyWeCanWrite(fd.get(), "the run directory", "--run-dir").ok());
}

TEST_F(PrivateDirectoryTest, GroupOrOthersWritableIsRefusedNamingModeAndSetting) {
  for (mode_t mode : {0775, 0757, 01777}) {
    ASSERT_EQ(chmod(dir_.c_str(), mode), 0);
    ScopedFd fd = Open();
    absl::Status st = CheckOnlyWeCanWrite(fd.get(), "output_dir /x", "output_dir");
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_TRUE(absl::StrContains(st.message(), "output_dir /x can be written by others"))
        << st.message();
    EXPECT_TRUE(absl::StrContains(st.message(), "(output_dir)")) << st.message();
  }
}

TEST_F(PrivateDirectoryTest, AnotherOwnerIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another uid";
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
  ScopedFd fd = Open();
  absl::Status st = CheckOnlyWeCanWrite(fd.get(), "the run directory /r", "--run-dir");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "belongs to uid 65534, not to uid 0"))
      << st.message();
}

}  // namespace
}  // namespace ringside::base
