// base/small_file.h: ReadFileUpTo reads a file to its end, whatever size it
// reports, and refuses one longer than its limit.
#include "base/small_file.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ringside::base {
namespace {

class ReadFileUpToTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/ringside_small_file_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  std::string dir_;
};

TEST_F(ReadFileUpToTest, ReadsPastTheFirstChunk) {
  const std::string text(200 * 1024 + 7, 'x');
  const auto read = ReadFileUpTo(Write("big", text), 1 << 20);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, text);
}

TEST_F(ReadFileUpToTest, ReadsAnEmptyFile) {
  const auto read = ReadFileUpTo(Write("empty", ""), 10);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST_F(ReadFileUpToTest, TakesAFileOfExactlyTheLimit) {
  const auto read = ReadFileUpTo(Write("ten", "0123456789"), 10);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "0123456789");
}

TEST_F(ReadFileUpToTest, RefusesAFileOverTheLimit) {
  const std::string path = Write("eleven", "0123456789A");
  const auto read = ReadFileUpTo(path, 10);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST_F(ReadFileUpToTest, ReadsAProcFileThatReportsNoSize) {
  const auto read = ReadFileUpTo("/proc/self/maps", 64 << 20);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_NE(read->find("[stack]"), std::string::npos);
}

TEST_F(ReadFileUpToTest, NamesTheFileItCannotOpen) {
  const auto read = ReadFileUpTo(dir_ + "/missing", 10);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(dir_ + "/missing"), std::string::npos) << read.status();
}

}  // namespace
}  // namespace ringside::base
