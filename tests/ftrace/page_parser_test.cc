#include "ftrace/page_parser.h"

#include <dirent.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/ftrace/testing/fake_page.h"

namespace ringside::ftrace {
namespace {

using testing::FakePage;

PageParser DefaultParser() { return PageParser(PageHeaderFormat{}, EventHeaderFormat{}); }

TEST(PageParserTest, ReadsSmallAndLargeEventsWithTheirTimestamps) {
  const std::vector<uint8_t> page =
      FakePage(1000).Data(5, "abcd").Data(10, std::string(200, 'x')).Data(1, "efgh1234").Finish();
  std::vector<RawEvent> events;
  PageParser::PageResult r = DefaultParser().Parse(page.data(), page.size(), &events);
  EXPECT_EQ(r.error, PageParser::Error::kNone);
  EXPECT_EQ(r.page_timestamp, 1000u);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].timestamp, 1005u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(events[0].data), events[0].size), "abcd");
  EXPECT_EQ(events[1].timestamp, 1015u);
  EXPECT_EQ(events[1].size, 200u);
  EXPECT_EQ(events[2].timestamp, 1016u);
  EXPECT_EQ(events[2].size, 8u);
}

TEST(PageParserTest, TimeExtendAddsAndAbsoluteTimestampSets) {
  const std::vector<uint8_t> page = FakePage(1000)
                                        .TimeExtend(uint64_t{5} << 30)
                                        .Data(7, "aaaa")
                                        .Absolute(123456789012)
                                        .Data(3, "bbbb")
                                        .Finish();
  std::vector<RawEvent> events;
  PageParser::PageResult r = DefaultParser().Parse(page.data(), page.size(), &events);
  EXPECT_EQ(r.error, PageParser::Error::kNone);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].timestamp, 1000 + (uint64_t{5} << 30) + 7);
  EXPECT_EQ(events[1].timestamp, 123456789012u + 3);
}

TEST(PageParserTest, PaddingIsSkippedAndNullPaddingEndsThePage) {
  const std::vector<uint8_t> page = FakePage(0)
                                        .Data(1, "aaaa")
                                        .Padding(2, 12)
                                        .Data(1, "bbbb")
                                        .Raw(std::string("\x1d\x00\x00\x00", 4))  // 29, delta 0
                                        .Raw(std::string(8, 'z'))
                                        .Finish();
  std::vector<RawEvent> events;
  PageParser::PageResult r = DefaultParser().Parse(page.data(), page.size(), &events);
  EXPECT_EQ(r.error, PageParser::Error::kNone);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].timestamp, 4u);
}

TEST(PageParserTest, ReportsMissedEventsAndTheStoredCount) {
  std::vector<RawEvent> events;
  std::vector<uint8_t> page = FakePage().Data(1, "aaaa").Finish(/*missed=*/true, 42);
  PageParser::PageResult r = DefaultParser().Parse(page.data(), page.size(), &events);
  EXPECT_TRUE(r.lost_events);
  EXPECT_EQ(r.lost_count, 42u);
  EXPECT_EQ(events.size(), 1u);
  page = FakePage().Data(1, "aaaa").Finish(/*missed=*/true);
  r = DefaultParser().Parse(page.data(), page.size(), &events);
  EXPECT_TRUE(r.lost_events);
  EXPECT_EQ(r.lost_count, 0u);
  page = FakePage().Data(1, "aaaa").Finish();
  EXPECT_FALSE(DefaultParser().Parse(page.data(), page.size(), &events).lost_events);
}

TEST(PageParserTest, MalformedPagesStopWithANamedError) {
  std::vector<RawEvent> events;
  struct Case {
    std::vector<uint8_t> page;
    PageParser::Error error;
  };
  std::vector<Case> cases;
  cases.push_back({FakePage().SetCommit(5000).FinishWithCommit(), PageParser::Error::kBadCommit});
  // A 28-word event with only 8 bytes committed after its header.
  cases.push_back(
      {FakePage().Raw(std::string("\x1c\x00\x00\x00", 4) + std::string(8, 'a')).Finish(),
       PageParser::Error::kDataPastEnd});
  cases.push_back({FakePage().Raw(std::string("\x00\x00\x00\x00\x02\x00\x00\x00", 8)).Finish(),
                   PageParser::Error::kZeroDataLength});
  cases.push_back({FakePage().Raw(std::string("\x00\x00\x00\x00\xff\xff\x00\x00", 8)).Finish(),
                   PageParser::Error::kDataPastEnd});
  cases.push_back(
      {FakePage().Raw(std::string("\x1e\x00", 2)).Finish(), PageParser::Error::kShortEventHeader});
  cases.push_back({FakePage().Raw(std::string("\x1e\x00\x00\x00", 4)).Finish(),
                   PageParser::Error::kShortTimeExtend});
  cases.push_back({FakePage().Raw(std::string("\x3d\x00\x00\x00\x00\x10\x00\x00", 8)).Finish(),
                   PageParser::Error::kBadPadding});
  for (size_t i = 0; i < cases.size(); i++) {
    SCOPED_TRACE("case " + std::to_string(i));
    PageParser::PageResult r =
        DefaultParser().Parse(cases[i].page.data(), cases[i].page.size(), &events);
    EXPECT_EQ(r.error, cases[i].error) << PageErrorName(r.error);
  }
  uint8_t tiny[8] = {};
  EXPECT_EQ(DefaultParser().Parse(tiny, sizeof(tiny), &events).error,
            PageParser::Error::kShortPage);
}

TEST(PageParserTest, RandomPagesNeverReadOutsideThePage) {
  // Pages of random bytes with a plausible commit, in exactly-sized heap
  // buffers so that ASan catches any read past the end.
  std::vector<RawEvent> events;
  for (uint32_t seed = 0; seed < 20000; seed++) {
    std::mt19937 rng(seed);
    const size_t size = 16 + rng() % 4081;
    std::unique_ptr<uint8_t[]> page(new uint8_t[size]);
    for (size_t i = 0; i < size; i++) page[i] = static_cast<uint8_t>(rng());
    const uint64_t commit = (rng() % (size + 8)) | (uint64_t{rng() % 4} << 30);
    std::memcpy(page.get() + 8, &commit, 8);
    events.clear();
    PageParser::PageResult r = DefaultParser().Parse(page.get(), size, &events);
    for (const RawEvent& e : events) {
      ASSERT_GE(e.data, page.get());
      ASSERT_LE(e.data + e.size, page.get() + size);
    }
    (void)r;
  }
}

TEST(PageParserTest, ParsesRealPagesCapturedOnThisMachine) {
  DIR* dir = opendir("tests/fuzz/corpus/page_parser");
  ASSERT_NE(dir, nullptr) << "run from the repository root";
  int pages = 0;
  size_t total_events = 0;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind("real_", 0) != 0) continue;
    std::ifstream in("tests/fuzz/corpus/page_parser/" + name, std::ios::binary);
    std::vector<uint8_t> page((std::istreambuf_iterator<char>(in)), {});
    std::vector<RawEvent> events;
    PageParser::PageResult r = DefaultParser().Parse(page.data(), page.size(), &events);
    EXPECT_EQ(r.error, PageParser::Error::kNone) << name << ": " << PageErrorName(r.error);
    for (size_t i = 1; i < events.size(); i++) {
      EXPECT_GE(events[i].timestamp, events[i - 1].timestamp) << name;
    }
    total_events += events.size();
    pages++;
  }
  closedir(dir);
  EXPECT_GE(pages, 2);
  EXPECT_GT(total_events, 20u);
}

}  // namespace
}  // namespace ringside::ftrace
