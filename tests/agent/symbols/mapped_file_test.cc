// agent/symbols/internal/mapped_file.h: a path from another process's maps
// opens that process's file or nothing: never a host file through a link
// or "..", never anything but a regular file.
#include "agent/symbols/internal/mapped_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/agent/symbols/test_binaries.h"

namespace ringside::agent::internal {
namespace {

using agent::testing::ScratchDir;

constexpr pid_t kPid = 77;
constexpr uint64_t kLimit = uint64_t{1} << 30;

// A /proc tree whose process 77 has the root `container/`, as a process in a
// container would, and a file outside it the container must not reach.
class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    std::filesystem::create_directories(dir_.Path("proc/77"));
    std::filesystem::create_directories(dir_.Path("container/usr/lib"));
    std::filesystem::create_directory_symlink(dir_.Path("container"), dir_.Path("proc/77/root"));
    host_secret_ = dir_.Write("host_secret", "not the container's");
  }

  MapsEntry Mapping(const std::string& path, uint64_t inode) {
    MapsEntry e;
    e.start = 0x1000;
    e.end = 0x2000;
    e.kind = MapsEntry::Kind::kFile;
    e.path = path;
    e.inode = inode;
    return e;
  }
  uint64_t Inode(const std::string& path) {
    struct stat st = {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_ino;
  }
  absl::StatusOr<MappedFile> Open(const MapsEntry& e, uint64_t limit = kLimit) {
    return OpenMappedFile(dir_.Path("proc"), kPid, e, limit);
  }

  ScratchDir dir_;
  std::string host_secret_;
};

TEST_F(MappedFileTest, OpensTheContainersOwnFileUnderItsRoot) {
  const std::string lib = dir_.Write("container/usr/lib/libx.so", "library bytes");
  const auto file = Open(Mapping("/usr/lib/libx.so", Inode(lib)));
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::StatusOr<base::ScopedFd> fd = file->OpenForReading();
  ASSERT_TRUE(fd.ok()) << fd.status();
  char buf[32] = {};
  EXPECT_EQ(read(fd->get(), buf, sizeof(buf)), 13);
  EXPECT_EQ(std::string(buf), "library bytes");
  EXPECT_EQ(file->st.st_ino, Inode(lib));
}

TEST_F(MappedFileTest, AnAbsoluteSymlinkStaysInsideTheContainer) {
  std::filesystem::create_symlink(host_secret_, dir_.Path("container/usr/lib/evil.so"));
  const auto file = Open(Mapping("/usr/lib/evil.so", Inode(host_secret_)));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
}

TEST_F(MappedFileTest, DotDotStopsAtTheContainersRoot) {
  const std::string escape = "/../../../../../../../.." + host_secret_;
  const auto file = Open(Mapping(escape, Inode(host_secret_)));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
}

TEST_F(MappedFileTest, AFileReplacedSinceItWasMappedIsNotRead) {
  const std::string lib = dir_.Write("container/usr/lib/libx.so", "new version");
  const auto file = Open(Mapping("/usr/lib/libx.so", Inode(lib) + 1));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
}

TEST_F(MappedFileTest, OnlyARegularFileIsOpened) {
  ASSERT_EQ(mkfifo(dir_.Path("container/usr/lib/fifo").c_str(), 0600), 0);
  const auto fifo =
      Open(Mapping("/usr/lib/fifo", Inode(dir_.Path("container/usr/lib/fifo"))));  // no hang
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kFailedPrecondition) << fifo.status();
  const auto dir = Open(Mapping("/usr/lib", Inode(dir_.Path("container/usr/lib"))));
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition) << dir.status();
}

TEST_F(MappedFileTest, AFileOverTheLimitIsRefused) {
  const std::string lib = dir_.Write("container/usr/lib/big.so", std::string(4096, 'x'));
  const auto file = Open(Mapping("/usr/lib/big.so", Inode(lib)), /*limit=*/4095);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted) << file.status();
}

TEST_F(MappedFileTest, ADeletedFileNeedsMapFiles) {
  MapsEntry e = Mapping("/usr/lib/gone.so", 12345);
  e.deleted = true;
  const auto file = Open(e);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_NE(file.status().message().find("deleted"), std::string::npos) << file.status();
}

TEST_F(MappedFileTest, AProcessThatIsGoneIsNotFound) {
  const auto file = OpenMappedFile(dir_.Path("proc"), 78, Mapping("/usr/lib/libx.so", 1), kLimit);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
}

}  // namespace
}  // namespace ringside::agent::internal
