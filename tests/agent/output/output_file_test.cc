#include "agent/output/output_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ringside-output-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  int EntriesInDir() {
    int n = 0;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.' || std::string(e->d_name).size() > 2;
    closedir(d);
    return n;
  }

  std::string dir_;
};

TEST_F(OutputFileTest, AWholeFileAppearsOnlyAtFinishCutToItsSize) {
  const std::string path = dir_ + "/t.pftrace";
  absl::StatusOr<std::unique_ptr<OutputFile>> f =
      OutputFile::Open(path, OutputFile::Mode::kWholeFile, 1 << 20);
  ASSERT_TRUE(f.ok()) << f.status();
  TraceSink* sink = f->get();
  ASSERT_TRUE(sink->Write("abc").ok());
  ASSERT_TRUE(sink->Write("def").ok());
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);  // Not there yet.
  EXPECT_EQ(sink->bytes_written(), 6u);
  ASSERT_TRUE(sink->Finish().ok());
  EXPECT_EQ(Read(path), "abcdef");  // The reserved megabyte is gone.
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(EntriesInDir(), 1);  // No temporary file left.
  EXPECT_EQ(sink->Write("x").code(), absl::StatusCode::kFailedPrecondition);
}

// output_group: the file is the group's to read from the moment it has its
// final name.
TEST_F(OutputFileTest, AWholeFileSharedWithAGroupAppearsAs0640OfThatGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a file to another group needs root";
  const gid_t group = 4;  // Any group but ours will do; Debian's adm.
  ASSERT_NE(getegid(), group);
  const std::string path = dir_ + "/t.pftrace";
  absl::StatusOr<std::unique_ptr<OutputFile>> f =
      OutputFile::Open(path, OutputFile::Mode::kWholeFile, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->ShareWithGroup(group).ok());
  ASSERT_TRUE((*f)->Write("abc").ok());
  ASSERT_TRUE((*f)->Finish().ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, group);
  EXPECT_EQ(st.st_uid, geteuid());
  // Once in place it is too late: the file was visible with another mode.
  EXPECT_EQ((*f)->ShareWithGroup(group).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(OutputFileTest, AnUnfinishedWholeFileLeavesTheOldFileAndNoTemporary) {
  const std::string path = dir_ + "/t.pftrace";
  std::ofstream(path) << "old trace";
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> f =
        OutputFile::Open(path, OutputFile::Mode::kWholeFile, 4096);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)->Write("new").ok());
    EXPECT_EQ(EntriesInDir(), 2);  // The target and the temporary file.
  }
  EXPECT_EQ(Read(path), "old trace");
  EXPECT_EQ(EntriesInDir(), 1);
}

TEST_F(OutputFileTest, AStreamedFileHoldsEachWriteAtOnce) {
  const std::string path = dir_ + "/s.pftrace";
  absl::StatusOr<std::unique_ptr<OutputFile>> f =
      OutputFile::Open(path, OutputFile::Mode::kStreaming, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write("abc").ok());
  EXPECT_EQ(Read(path), "abc");
  ASSERT_TRUE((*f)->Write("def").ok());
  EXPECT_EQ(Read(path), "abcdef");
  ASSERT_TRUE((*f)->Finish().ok());
  EXPECT_EQ(Read(path), "abcdef");
  EXPECT_EQ((*f)->display_name(), path);
}

// Run as root, ringside must not write through a symlink another user
// planted at the output name: it points wherever they like (issue 52).
TEST_F(OutputFileTest, AnotherUsersSymlinkIsRefusedUnlessAskedToFollowIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  const std::string victim = dir_ + "/root-owned.conf", link = dir_ + "/t.pftrace";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
  absl::StatusOr<std::unique_ptr<OutputFile>> f =
      OutputFile::Open(link, OutputFile::Mode::kWholeFile, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(f.status().message().find("symlink to " + victim + " owned by uid 65534, not by you"),
            std::string::npos)
      << f.status();
  EXPECT_NE(f.status().message().find("--follow-symlink"), std::string::npos) << f.status();
  EXPECT_EQ(Read(victim), "precious");
  // Streaming neither.
  EXPECT_FALSE(OutputFile::Open(link, OutputFile::Mode::kStreaming, 0).ok());
  EXPECT_EQ(Read(victim), "precious");

  // Asked to: the target gets the trace, the link stays.
  f = OutputFile::Open(link, OutputFile::Mode::kWholeFile, 0, OutputFile::Symlinks::kFollowAny);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write("trace").ok());
  ASSERT_TRUE((*f)->Finish().ok());
  EXPECT_EQ(Read(victim), "trace");
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// The caller's own links, and root's where only root may write
// (/dev/stdout), are followed as before.
TEST_F(OutputFileTest, TheCallersOwnSymlinkIsFollowed) {
  const std::string target = dir_ + "/target.pftrace", link = dir_ + "/link.pftrace";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  std::ofstream(target) << "old";
  absl::StatusOr<std::unique_ptr<OutputFile>> f =
      OutputFile::Open(link, OutputFile::Mode::kWholeFile, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write("new").ok());
  ASSERT_TRUE((*f)->Finish().ok());
  EXPECT_EQ(Read(target), "new");
}

TEST(StringSinkTest, KeepsWhatWasWrittenAndRefusesWritesOnceFinished) {
  StringSink sink;
  ASSERT_TRUE(sink.Write("ab").ok());
  ASSERT_TRUE(sink.Write("c").ok());
  EXPECT_EQ(sink.data(), "abc");
  EXPECT_EQ(sink.bytes_written(), 3u);
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_FALSE(sink.Write("d").ok());
  EXPECT_EQ(sink.data(), "abc");
}

}  // namespace
}  // namespace ringside::agent
