// agent/lifecycle/open_file_limit.h: the agent's soft limit of open files
// goes up to its hard limit (at most kAgentOpenFiles), never down.
#include "agent/lifecycle/open_file_limit.h"

#include <sys/resource.h>

#include <algorithm>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// Puts this process's RLIMIT_NOFILE back as it was.
class OpenFileLimitTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved_), 0); }
  void TearDown() override { EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &saved_), 0); }
  static rlim_t Soft() {
    rlimit l{};
    getrlimit(RLIMIT_NOFILE, &l);
    return l.rlim_cur;
  }
  static bool SetSoft(rlim_t soft) {
    rlimit l{};
    getrlimit(RLIMIT_NOFILE, &l);
    l.rlim_cur = soft;
    return setrlimit(RLIMIT_NOFILE, &l) == 0;
  }
  rlimit saved_{};
};

TEST_F(OpenFileLimitTest, SystemdsSoftLimitIsRaisedToTheHardOne) {
  if (saved_.rlim_max <= 1024) GTEST_SKIP() << "a hard limit of " << saved_.rlim_max;
  ASSERT_TRUE(SetSoft(1024));
  const rlim_t want = std::min(saved_.rlim_max, kAgentOpenFiles);
  EXPECT_EQ(RaiseOpenFileLimit(), want);
  EXPECT_EQ(Soft(), want);
  EXPECT_EQ(RaiseOpenFileLimit(), want) << "a second call changes nothing";
}

TEST_F(OpenFileLimitTest, AHigherSoftLimitIsNeverLowered) {
  const rlim_t high = kAgentOpenFiles * 2;
  rlimit l = saved_;
  l.rlim_cur = high;
  l.rlim_max = std::max(saved_.rlim_max, high);
  // Above a hard limit of 65536 or less: root (CAP_SYS_RESOURCE) may raise it.
  if (setrlimit(RLIMIT_NOFILE, &l) != 0) {
    GTEST_SKIP() << "a soft limit of " << high << " open files needs CAP_SYS_RESOURCE here";
  }
  EXPECT_EQ(RaiseOpenFileLimit(), high);
  EXPECT_EQ(Soft(), high);
}

}  // namespace
}  // namespace ringside::agent
