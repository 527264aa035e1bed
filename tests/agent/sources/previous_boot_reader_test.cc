// PreviousBootReader over crafted pages: what an earlier boot's ring holds,
// malformed pages and gaps among them. The real instance is read in the
// kernel matrix (tests/kernels: 6.12, a panic, the next boot).

#include "agent/sources/previous_boot_reader.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ftrace/event_format.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"
#include "tests/ftrace/testing/fake_page.h"
#include "tests/ftrace/testing/kernel_formats.h"

namespace ringside::agent {
namespace {

using ftrace::testing::FakePage;
using ftrace::testing::PrintRecord;
using ftrace::testing::SchedSwitchRecord;

std::unique_ptr<ftrace::CpuReader> CpuWith(int cpu, const std::vector<std::vector<uint8_t>>& pages,
                                           size_t trailing_bytes = 0) {
  std::unique_ptr<ftrace::CpuReader> r =
      ftrace::testing::CpuReaderOfPages(cpu, pages, trailing_bytes);
  EXPECT_NE(r, nullptr);
  return r;
}

struct ReadBack {
  PreviousBootReader::Stats stats;
  std::vector<trace::TracePacket> packets;
  int bundles_after_gap = 0;
  int switches = 0;
  std::vector<std::string> prints;
};

ReadBack ReadAll(std::vector<std::unique_ptr<ftrace::CpuReader>> readers) {
  std::unique_ptr<PreviousBootReader> reader = PreviousBootReader::ForTesting(
      ftrace::testing::SchedSwitchAndPrintTable(),
      ftrace::PageParser(ftrace::PageHeaderFormat{}, ftrace::EventHeaderFormat{}),
      std::move(readers));
  ReadBack out;
  int after_bundle = 0;
  out.packets = testing::WriteAndReadBack(
      [&](TraceWriter* w) { out.stats = reader->ReadAll(w, [&] { after_bundle++; }); });
  for (const trace::TracePacket& p : out.packets) {
    if (!p.has_ftrace_events()) continue;
    out.bundles_after_gap += p.ftrace_events().lost_events() ? 1 : 0;
    out.switches += p.ftrace_events().compact_sched().switch_timestamp_size();
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.has_print()) out.prints.push_back(e.print().buf());
    }
  }
  EXPECT_GT(after_bundle, 0);
  return out;
}

TEST(PreviousBootReaderTest, ReadsEveryCpusEventsWithTheirSpan) {
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(CpuWith(0, {FakePage(1000)
                                    .Data(10, SchedSwitchRecord(1, "init", 42, "kt-named"))
                                    .Data(10, SchedSwitchRecord(42, "kt-named", 0, "swapper/0"))
                                    .Finish()}));
  readers.push_back(CpuWith(
      1, {FakePage(5000)
              .Data(0, PrintRecord("ringside-boot boot_id=b"))
              .Data(1, PrintRecord("hello"))
              .Finish(),
          FakePage(9000).Data(5, SchedSwitchRecord(7, "kt-panicker", 0, "swapper/1")).Finish()}));
  const ReadBack r = ReadAll(std::move(readers));
  EXPECT_EQ(r.stats.pages, 3u);
  EXPECT_EQ(r.stats.events, 4u);
  EXPECT_EQ(r.stats.pages_malformed, 0u);
  // The boot recorder's marker is left out (the file's boot id and clocks
  // say what it said), other trace_marker writes kept.
  EXPECT_EQ(r.stats.markers, 1u);
  ASSERT_EQ(r.stats.cpus.size(), 2u);
  EXPECT_EQ(r.stats.cpus[0].first_ns, 1010u);
  EXPECT_EQ(r.stats.cpus[0].last_ns, 1020u);
  EXPECT_EQ(r.stats.cpus[1].events, 2u);
  EXPECT_EQ(r.stats.first_ns(), 1010u);
  EXPECT_EQ(r.stats.last_ns(), 9005u);
  EXPECT_EQ(r.switches, 3);
  ASSERT_EQ(r.prints.size(), 1u);
  EXPECT_EQ(r.prints[0], "hello");
  EXPECT_EQ(r.bundles_after_gap, 0);
}

TEST(PreviousBootReaderTest, AMalformedPageIsSkippedNamedAndTheRestRead) {
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(
      CpuWith(0, {FakePage(1000).Data(1, SchedSwitchRecord(1, "a", 2, "b")).Finish(),
                  FakePage().SetCommit(5000).FinishWithCommit(),
                  FakePage(3000).Data(1, SchedSwitchRecord(2, "b", 1, "a")).Finish()}));
  const ReadBack r = ReadAll(std::move(readers));
  EXPECT_EQ(r.stats.pages, 3u);
  EXPECT_EQ(r.stats.events, 2u);
  EXPECT_EQ(r.stats.pages_malformed, 1u);
  EXPECT_TRUE(absl::StrContains(r.stats.first_malformed, "cpu 0, page 2"))
      << r.stats.first_malformed;
  EXPECT_EQ(r.switches, 2);
}

TEST(PreviousBootReaderTest, APageAfterAGapStartsABundleThatSaysSo) {
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(
      CpuWith(0, {FakePage(1000).Data(1, SchedSwitchRecord(1, "a", 2, "b")).Finish(),
                  FakePage(2000).Data(1, SchedSwitchRecord(2, "b", 1, "a")).Finish(true, 17)}));
  const ReadBack r = ReadAll(std::move(readers));
  EXPECT_EQ(r.stats.pages_with_lost, 1u);
  EXPECT_EQ(r.stats.lost_stored, 17u);
  EXPECT_EQ(r.bundles_after_gap, 1);
  EXPECT_EQ(r.switches, 2);
}

TEST(PreviousBootReaderTest, PartOfAPageEndsThatCpuAndIsCounted) {
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(
      CpuWith(0, {FakePage(1000).Data(1, SchedSwitchRecord(1, "a", 2, "b")).Finish()}, 100));
  readers.push_back(
      CpuWith(1, {FakePage(1000).Data(1, SchedSwitchRecord(3, "c", 4, "d")).Finish()}));
  const ReadBack r = ReadAll(std::move(readers));
  EXPECT_EQ(r.stats.events, 2u);
  EXPECT_EQ(r.stats.pages_malformed, 1u);
  EXPECT_TRUE(absl::StrContains(r.stats.first_malformed, "cpu 0")) << r.stats.first_malformed;
}

TEST(PreviousBootReaderTest, RecordsOfUnknownEventsAreSkippedAndCounted) {
  std::string unknown = SchedSwitchRecord(1, "a", 2, "b");
  const uint16_t id = 999;
  std::memcpy(unknown.data(), &id, 2);
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(CpuWith(
      0, {FakePage(1000).Data(1, unknown).Data(1, SchedSwitchRecord(1, "a", 2, "b")).Finish()}));
  const ReadBack r = ReadAll(std::move(readers));
  EXPECT_EQ(r.stats.unknown_events, 1u);
  EXPECT_EQ(r.switches, 1);
}

// What a reboot may leave of pages the kernel did not check: valid pages
// with bytes flipped, commits of any value, a read cut short. Thousands of
// them read without a crash (make asan: without a read outside them), and
// every bundle written decodes.
TEST(PreviousBootReaderTest, CorruptPagesNeverCrashAndWhatIsWrittenDecodes) {
  // Flipped bytes in comms and texts make strings that are not UTF-8, which
  // libprotobuf logs as it decodes them (and decodes): not this test's
  // business, and hundreds of lines.
  google::protobuf::LogHandler* const log = google::protobuf::SetLogHandler(nullptr);
  std::mt19937 rng(55);
  for (int round = 0; round < 200; round++) {
    std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
    for (int cpu = 0; cpu < 2; cpu++) {
      std::vector<std::vector<uint8_t>> pages;
      for (int p = 0; p < 8; p++) {
        std::vector<uint8_t> page = FakePage(1000 + p)
                                        .Data(3, SchedSwitchRecord(1, "a", 2, "b"))
                                        .Data(3, PrintRecord("some text"))
                                        .TimeExtend(1 << 28)
                                        .Data(3, SchedSwitchRecord(2, "b", 1, "a"))
                                        .Finish(rng() % 4 == 0, rng() % 3);
        const int flips = static_cast<int>(rng() % 24);
        for (int f = 0; f < flips; f++) page[rng() % page.size()] ^= static_cast<uint8_t>(rng());
        if (rng() % 5 == 0) {
          const uint64_t commit = rng();
          std::memcpy(page.data() + 8, &commit, 8);
        }
        pages.push_back(std::move(page));
      }
      readers.push_back(CpuWith(cpu, pages, rng() % 3 == 0 ? rng() % 4096 : 0));
    }
    const ReadBack r = ReadAll(std::move(readers));
    // Every whole page is read, whatever it holds.
    EXPECT_EQ(r.stats.pages, 16u);
  }
  google::protobuf::SetLogHandler(log);
}

}  // namespace
}  // namespace ringside::agent
