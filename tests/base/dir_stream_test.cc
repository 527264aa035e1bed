#include "base/dir_stream.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "base/scoped_fd.h"
#include "gtest/gtest.h"

namespace ringside::base {
namespace {

std::set<std::string> Names(DIR* d) {
  std::set<std::string> names;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.insert(e->d_name);
  }
  return names;
}

int OpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n++;
  return n;
}

class DirStreamTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dir_stream_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* name : {"a", "b", "c"}) {
      ScopedFd f(open((dir_ + "/" + name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
      ASSERT_TRUE(f.valid());
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// The caller's descriptor was read to its end already: the stream still
// lists every entry, and the caller's descriptor stays open and its own.
TEST_F(DirStreamTest, ListsEveryEntryWhateverTheCallersOffsetAndLeavesItsFdOpen) {
  const ScopedFd dir(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir.valid());
  {
    const DirStream first = OpenDirStream(dir.get());
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(Names(first.get()), (std::set<std::string>{"a", "b", "c"}));
  }
  const DirStream again = OpenDirStream(dir.get());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(Names(again.get()), (std::set<std::string>{"a", "b", "c"}));
  struct stat st;
  EXPECT_EQ(fstat(dir.get(), &st), 0) << "the caller's descriptor was closed";
}

TEST_F(DirStreamTest, ClosesItsOwnDescriptorWithTheStream) {
  const ScopedFd dir(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const int before = OpenFds();
  { const DirStream d = OpenDirStream(dir.get()); }
  EXPECT_EQ(OpenFds(), before);
}

TEST_F(DirStreamTest, NotADirectoryIsNullWithErrnoAndLeavesNothingOpen) {
  const ScopedFd file(open((dir_ + "/a").c_str(), O_RDONLY | O_CLOEXEC));
  const int before = OpenFds();
  errno = 0;
  EXPECT_EQ(OpenDirStream(file.get()), nullptr);
  EXPECT_EQ(errno, ENOTDIR);
  EXPECT_EQ(OpenFds(), before);
  EXPECT_EQ(OpenDirStream(-1), nullptr);
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace ringside::base
