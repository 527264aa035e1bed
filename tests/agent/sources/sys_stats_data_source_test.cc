#include "agent/sources/sys_stats_data_source.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/read_packets.h"

namespace ringside::agent {
namespace {

using trace::SysStats;

// A /proc of the test's own, whose files it writes.
class FakeProc {
 public:
  FakeProc() {
    char tmpl[] = "/tmp/ringside-fake-proc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directory(dir_ + "/pressure");
    Write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 800 kB\n");
    Write("vmstat", "nr_free_pages 10\npgmajfault 7\n");
    Write("stat", "cpu  1 0 1 1 0 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\nprocesses 42\n");
    for (const char* f : {"cpu", "io", "memory"}) {
      Write(std::string("pressure/") + f,
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=2\n");
    }
  }
  ~FakeProc() { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::trunc) << text;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

class SysStatsDataSourceTest : public ::testing::Test {
 protected:
  SysStatsDataSourceTest() : producer_(1, {}, ProducerBuffer::Options{}) {}

  // Every SysStats packet committed so far, oldest first.
  std::vector<trace::TracePacket> Samples() {
    for (trace::TracePacket& p :
         testing::CommitAndRead(&producer_, buffer_.get(),
                                [](const trace::TracePacket& p) { return p.has_sys_stats(); })) {
      all_.push_back(std::move(p));
    }
    return all_;
  }

  static uint64_t Meminfo(const trace::TracePacket& p, int key) {
    for (const auto& m : p.sys_stats().meminfo()) {
      if (m.key() == key) return m.value();
    }
    return 0;
  }

  FakeProc proc_;
  ProducerBuffer producer_;
  std::unique_ptr<buffer::TraceBuffer> buffer_ = buffer::TraceBuffer::Create(1 << 20);
  std::vector<trace::TracePacket> all_;
};

TEST_F(SysStatsDataSourceTest, WritesEveryKindAtStartAndTheNewestValuesAtAFlush) {
  SysStatsDataSource::Config c;
  c.proc = proc_.dir();
  c.meminfo_period_ms = c.vmstat_period_ms = c.stat_period_ms = c.psi_period_ms = 3600000;
  auto ds = SysStatsDataSource::Create(c, &producer_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE((*ds)->warnings().empty());
  ASSERT_TRUE((*ds)->Start().ok());
  ASSERT_TRUE((*ds)->FlushStaging(absl::Seconds(10)));
  std::vector<trace::TracePacket> s = Samples();
  ASSERT_FALSE(s.empty());
  const trace::TracePacket& first = s.front();
  EXPECT_GT(first.timestamp(), 0u);
  EXPECT_GE(first.sys_stats().collection_end_timestamp(), first.timestamp());
  EXPECT_EQ(Meminfo(first, trace::MEMINFO_MEM_AVAILABLE), 800u);
  ASSERT_EQ(first.sys_stats().vmstat_size(), 2);
  EXPECT_EQ(first.sys_stats().vmstat(1).key(), trace::VMSTAT_PGMAJFAULT);
  EXPECT_EQ(first.sys_stats().vmstat(1).value(), 7u);
  ASSERT_EQ(first.sys_stats().cpu_stat_size(), 1);
  EXPECT_EQ(first.sys_stats().num_forks(), 42u);
  // Three files, a "some" and a "full" each; µs become ns.
  ASSERT_EQ(first.sys_stats().psi_size(), 6);
  EXPECT_EQ(first.sys_stats().psi(0).resource(), SysStats::PsiSample::PSI_RESOURCE_CPU_SOME);
  EXPECT_EQ(first.sys_stats().psi(0).total_ns(), 5000u);
  EXPECT_EQ(first.sys_stats().psi(5).resource(), SysStats::PsiSample::PSI_RESOURCE_MEMORY_FULL);

  // Not due for an hour, but a snapshot's flush samples at once.
  proc_.Write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 120 kB\n");
  ASSERT_TRUE((*ds)->FlushStaging(absl::Seconds(10)));
  s = Samples();
  EXPECT_EQ(Meminfo(s.back(), trace::MEMINFO_MEM_AVAILABLE), 120u);
  (*ds)->Stop();
  EXPECT_EQ((*ds)->read_errors(), 0u);
}

TEST_F(SysStatsDataSourceTest, EachKindKeepsItsOwnPeriod) {
  SysStatsDataSource::Config c;
  c.proc = proc_.dir();
  c.meminfo_period_ms = 10;
  c.psi_period_ms = 3600000;
  auto ds = SysStatsDataSource::Create(c, &producer_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((*ds)->samples() < 5 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  (*ds)->Stop();
  int meminfo = 0, psi = 0;
  for (const trace::TracePacket& p : Samples()) {
    meminfo += p.sys_stats().meminfo_size() > 0;
    psi += p.sys_stats().psi_size() > 0;
  }
  EXPECT_GE(meminfo, 5);
  EXPECT_EQ(psi, 1) << "the hourly PSI sample is taken once, at the start";
}

TEST_F(SysStatsDataSourceTest, AKernelWithoutPsiLeavesItOutAndSaysWhy) {
  std::filesystem::remove_all(proc_.dir() + "/pressure");
  SysStatsDataSource::Config c;
  c.proc = proc_.dir();
  c.meminfo_period_ms = c.psi_period_ms = 1000;
  auto ds = SysStatsDataSource::Create(c, &producer_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->warnings().size(), 1u);
  EXPECT_TRUE(absl::StrContains((*ds)->warnings()[0], "psi_period_ms"));
  EXPECT_TRUE(absl::StrContains((*ds)->warnings()[0], "CONFIG_PSI"));
  EXPECT_TRUE(absl::StrContains((*ds)->warnings()[0], "psi=1"));
  EXPECT_TRUE(
      absl::StartsWith((*ds)->warnings()[0], "psi_period_ms: no " + proc_.dir() + "/pressure: "))
      << (*ds)->warnings()[0];
  ASSERT_TRUE((*ds)->Start().ok());
  ASSERT_TRUE((*ds)->FlushStaging(absl::Seconds(10)));
  (*ds)->Stop();
  const std::vector<trace::TracePacket> s = Samples();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front().sys_stats().psi_size(), 0);
  EXPECT_EQ(Meminfo(s.front(), trace::MEMINFO_MEM_TOTAL), 1000u);
}

TEST_F(SysStatsDataSourceTest, NothingToReadIsAnErrorNamingTheFile) {
  SysStatsDataSource::Config c;
  c.proc = proc_.dir() + "/missing";
  c.meminfo_period_ms = 1000;
  auto ds = SysStatsDataSource::Create(c, &producer_);
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(absl::StrContains(ds.status().message(), "missing/meminfo")) << ds.status();
}

TEST_F(SysStatsDataSourceTest, ReadsThisMachinesProc) {
  SysStatsDataSource::Config c;
  c.meminfo_period_ms = c.stat_period_ms = 1000;
  auto ds = SysStatsDataSource::Create(c, &producer_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->Start().ok());
  ASSERT_TRUE((*ds)->FlushStaging(absl::Seconds(10)));
  (*ds)->Stop();
  const std::vector<trace::TracePacket> s = Samples();
  ASSERT_FALSE(s.empty());
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t total = 0;
  while (in >> key >> total && key != "MemTotal:") in.ignore(1 << 10, '\n');
  EXPECT_EQ(Meminfo(s.front(), trace::MEMINFO_MEM_TOTAL), total);
  EXPECT_EQ(s.front().sys_stats().cpu_stat_size(), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_GT(s.front().sys_stats().num_forks(), 0u);
}

}  // namespace
}  // namespace ringside::agent
