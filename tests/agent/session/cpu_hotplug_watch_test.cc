#include "agent/session/cpu_hotplug_watch.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/ringside_cli.h"

namespace ringside::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseCpuListTest, ReadsRangesAndSingleCpus) {
  EXPECT_EQ(ParseCpuList("0-1\n"), (std::set<int>{0, 1}));
  EXPECT_EQ(ParseCpuList("0,2-4,7\n"), (std::set<int>{0, 2, 3, 4, 7}));
  EXPECT_EQ(ParseCpuList("5"), (std::set<int>{5}));
  EXPECT_EQ(ParseCpuList("\n"), (std::set<int>{}));
}

TEST(ParseCpuListTest, RefusesWhatIsNotACpuList) {
  for (const char* bad : {"x", "1-", "-1", "3-1", "0,,1", "0-99999999", "1 2", "0-1-2"}) {
    EXPECT_FALSE(ParseCpuList(bad).has_value()) << bad;
  }
}

class CpuHotplugWatchTest : public ::testing::Test {
 protected:
  void SetOnline(const std::string& list) { std::ofstream(path_) << list << "\n"; }
  std::string path_ = testing::TempPath("cpu_online");
};

TEST_F(CpuHotplugWatchTest, SaysWhichCpuWentOfflineAndWhichCameBack) {
  SetOnline("0-3");
  CpuHotplugWatch watch(path_);
  EXPECT_THAT(watch.Poll(), IsEmpty());
  SetOnline("0,2-3");
  std::vector<std::string> lines = watch.Poll();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("CPU 1 went offline"));
  EXPECT_THAT(watch.Poll(), IsEmpty());  // Said once.
  SetOnline("0-3");
  EXPECT_THAT(watch.Poll(), ElementsAre(HasSubstr("CPU 1 came online")));
}

TEST_F(CpuHotplugWatchTest, AnUnreadableListChangesNothing) {
  SetOnline("0-1");
  CpuHotplugWatch watch(path_);
  SetOnline("garbage");
  EXPECT_THAT(watch.Poll(), IsEmpty());
  SetOnline("0");
  EXPECT_THAT(watch.Poll(), ElementsAre(HasSubstr("CPU 1 went offline")));
}

}  // namespace
}  // namespace ringside::agent
