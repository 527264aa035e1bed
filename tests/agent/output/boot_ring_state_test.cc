#include "agent/output/boot_ring_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

TEST(BootRingStateTest, TheBootWrittenIsTheBootReadAfterARestart) {
  testing::ScratchDir scratch;
  absl::StatusOr<std::unique_ptr<OutputDir>> dir = OutputDir::Open(scratch.path(), std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(ReadRecordedBoot(**dir), std::nullopt);
  ASSERT_TRUE(WriteRecordedBoot(**dir, "84c2a617-d156-4dd4-aec1-ae9d277a9548").ok());
  ASSERT_TRUE(WriteRecordedBoot(**dir, "0e2063f1-5bf3-43d9-bb91-746564e8d05e").ok());
  EXPECT_EQ(ReadRecordedBoot(**dir), "0e2063f1-5bf3-43d9-bb91-746564e8d05e");
  struct stat st;
  ASSERT_EQ(stat(scratch.Join(kBootRingStateName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(access(scratch.Join(std::string(kBootRingStateName) + ".new").c_str(), F_OK), 0);
}

TEST(BootRingStateTest, AnythingButABootIdIsNone) {
  testing::ScratchDir scratch;
  absl::StatusOr<std::unique_ptr<OutputDir>> dir = OutputDir::Open(scratch.path(), std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const std::string& text : {std::string("../../etc/passwd\n"), std::string(""),
                                  std::string(100, 'a'), std::string("abc\x1b[2J\n")}) {
    std::ofstream(scratch.Join(kBootRingStateName), std::ios::trunc) << text;
    EXPECT_EQ(ReadRecordedBoot(**dir), std::nullopt) << text;
  }
  // A symlink planted at its name is neither read nor written through.
  unlink(scratch.Join(kBootRingStateName).c_str());
  const std::string target = scratch.Join("target");
  std::ofstream(target) << "0e2063f1\n";
  ASSERT_EQ(symlink(target.c_str(), scratch.Join(kBootRingStateName).c_str()), 0);
  EXPECT_EQ(ReadRecordedBoot(**dir), std::nullopt);
  ASSERT_TRUE(WriteRecordedBoot(**dir, "abcd").ok());
  std::ifstream in(target);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "0e2063f1");
  EXPECT_EQ(ReadRecordedBoot(**dir), "abcd");
}

}  // namespace
}  // namespace ringside::agent
