#include "agent/sources/proc_counters.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringside/trace/sys_stats_counters.pb.h"

namespace ringside::agent {
namespace {

// The first lines of this machine's /proc/meminfo, as a 6.x kernel writes
// them, with a line the parser does not know and one it cannot read.
constexpr char kMeminfo[] =
    "MemTotal:       24683664 kB\n"
    "MemFree:        22922228 kB\n"
    "MemAvailable:   23768456 kB\n"
    "Buffers:            3284 kB\n"
    "Cached:           935720 kB\n"
    "Active(anon):       1512 kB\n"
    "Hugepagesize:       2048 kB\n"
    "Dirty:          notanumber kB\n"
    "Committed_AS:      62156 kB\n";

TEST(ProcCountersTest, MeminfoKeepsEveryKnownCounterInKib) {
  const std::vector<ProcCounter> c = ParseMeminfo(kMeminfo, {});
  ASSERT_EQ(c.size(), 7u);
  EXPECT_EQ(c[0].key, trace::MEMINFO_MEM_TOTAL);
  EXPECT_EQ(c[0].value, 24683664u);
  EXPECT_EQ(c[2].key, trace::MEMINFO_MEM_AVAILABLE);
  EXPECT_EQ(c[2].value, 23768456u);
  EXPECT_EQ(c[5].key, trace::MEMINFO_ACTIVE_ANON);
  EXPECT_EQ(c[6].key, trace::MEMINFO_COMMITED_AS);
}

TEST(ProcCountersTest, MeminfoKeepsOnlyTheCountersAskedFor) {
  const std::vector<ProcCounter> c =
      ParseMeminfo(kMeminfo, {trace::MEMINFO_MEM_AVAILABLE, trace::MEMINFO_CACHED});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].key, trace::MEMINFO_MEM_AVAILABLE);
  EXPECT_EQ(c[1].key, trace::MEMINFO_CACHED);
  EXPECT_EQ(c[1].value, 935720u);
}

TEST(ProcCountersTest, VmstatNamesAreTheKernelsLowercaseOnes) {
  const std::vector<ProcCounter> c = ParseVmstat(
      "nr_free_pages 5730557\nnr_zone_inactive_anon 1\npgmajfault 29127\noom_kill 3\n"
      "pgscan_direct\nworkingset_refault_file 18446744073709551615\n",
      {});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].key, trace::VMSTAT_NR_FREE_PAGES);
  EXPECT_EQ(c[0].value, 5730557u);
  EXPECT_EQ(c[1].key, trace::VMSTAT_PGMAJFAULT);
  EXPECT_EQ(c[2].key, trace::VMSTAT_OOM_KILL);
  EXPECT_EQ(c[2].value, 3u);
  EXPECT_EQ(c[3].value, 18446744073709551615u);
}

TEST(ProcCountersTest, StatGivesEachCpusTimesInNanosecondsAndTheForks) {
  const ProcStat s = ParseProcStat(
      "cpu  100 0 50 1000 3 0 2 1 0 0\n"
      "cpu0 60 0 30 500 2 0 1 1 0 0\n"
      "cpu1 40 0 20 500 1 0 1 0 0 0\n"
      "intr 123 4 5\n"
      "ctxt 99\n"
      "processes 1245324\n"
      "procs_running 2\n",
      10000000);
  ASSERT_EQ(s.cpus.size(), 2u);
  EXPECT_EQ(s.cpus[0].cpu, 0u);
  EXPECT_EQ(s.cpus[0].user_ns, 600000000u);
  EXPECT_EQ(s.cpus[0].system_ns, 300000000u);
  EXPECT_EQ(s.cpus[0].idle_ns, 5000000000u);
  EXPECT_EQ(s.cpus[1].cpu, 1u);
  EXPECT_EQ(s.cpus[1].iowait_ns, 10000000u);
  EXPECT_EQ(s.cpus[0].steal_ns, 10000000u);
  ASSERT_TRUE(s.forks.has_value());
  EXPECT_EQ(*s.forks, 1245324u);
}

TEST(ProcCountersTest, StatSkipsAShortCpuLine) {
  const ProcStat s = ParseProcStat("cpu0 1 2 3\ncpu1 1 1 1 1 1 1 1 1\n", 1);
  ASSERT_EQ(s.cpus.size(), 1u);
  EXPECT_EQ(s.cpus[0].cpu, 1u);
  EXPECT_FALSE(s.forks.has_value());
}

TEST(ProcCountersTest, PressureReadsSomeAndFull) {
  const Pressure p = ParsePressure(
      "some avg10=12.50 avg60=3.25 avg300=0.00 total=31460\n"
      "full avg10=1.00 avg60=0.00 avg300=0.00 total=3572\n");
  ASSERT_TRUE(p.some.has_value());
  ASSERT_TRUE(p.full.has_value());
  EXPECT_DOUBLE_EQ(p.some->avg10, 12.5);
  EXPECT_DOUBLE_EQ(p.some->avg60, 3.25);
  EXPECT_EQ(p.some->total_us, 31460u);
  EXPECT_EQ(p.full->total_us, 3572u);
}

TEST(ProcCountersTest, PressureOfCpuBefore513HasNoFullLine) {
  const Pressure p = ParsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n");
  ASSERT_TRUE(p.some.has_value());
  EXPECT_FALSE(p.full.has_value());
}

TEST(ProcCountersTest, PressureIgnoresWhatItCannotRead) {
  const Pressure p = ParsePressure(
      "some avg10=x avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 total=5\nsome\n\n");
  EXPECT_FALSE(p.some.has_value());
  EXPECT_FALSE(p.full.has_value());
}

TEST(ProcCountersTest, ProcessStatusGivesTheMemoryLinesInKib) {
  const ProcessMemory m = ParseProcessStatus(
      "Name:\tpostgres\nVmPeak:\t  300000 kB\nVmSize:\t  290000 kB\nVmLck:\t       4 kB\n"
      "VmHWM:\t   81000 kB\nVmRSS:\t   80000 kB\nRssAnon:\t   50000 kB\n"
      "RssFile:\t   20000 kB\nRssShmem:\t   10000 kB\nVmSwap:\t     123 kB\nThreads:\t4\n");
  EXPECT_EQ(m.vm_size_kb, 290000u);
  EXPECT_EQ(m.vm_rss_kb, 80000u);
  EXPECT_EQ(m.rss_anon_kb, 50000u);
  EXPECT_EQ(m.rss_file_kb, 20000u);
  EXPECT_EQ(m.rss_shmem_kb, 10000u);
  EXPECT_EQ(m.vm_swap_kb, 123u);
  EXPECT_EQ(m.vm_locked_kb, 4u);
  EXPECT_EQ(m.vm_hwm_kb, 81000u);
}

TEST(ProcCountersTest, AKernelThreadsStatusHasNoMemory) {
  const ProcessMemory m = ParseProcessStatus("Name:\tkworker/0:1\nState:\tI (idle)\n");
  EXPECT_EQ(m.vm_rss_kb, 0u);
  EXPECT_EQ(m.vm_size_kb, 0u);
}

TEST(ProcCountersTest, StatmsSecondFieldIsTheResidentPages) {
  EXPECT_EQ(ResidentPagesOfStatm("72500 20000 5000 100 0 40000 0\n"), 20000u);
  EXPECT_EQ(ResidentPagesOfStatm("0 0 0 0 0 0 0\n"), 0u);
  EXPECT_FALSE(ResidentPagesOfStatm("").has_value());
  EXPECT_FALSE(ResidentPagesOfStatm("12 x").has_value());
}

}  // namespace
}  // namespace ringside::agent
