#include "agent/sources/process_stats_data_source.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/read_packets.h"
#include "tests/testing/workloads.h"

namespace ringside::agent {
namespace {

// A child that touches `mib` MiB of its own memory and sleeps until killed;
// its oom_score_adj set to `adj`. With `mib` 0 it execs sleep(1) instead,
// so that it holds none of this process's memory (a forked child shares
// its pages: under ASan, tens of MiB).
class MemoryHolder {
 public:
  MemoryHolder(size_t mib, int adj) {
    if (mib == 0) {
      pid_ = fork();
      if (pid_ == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        _exit(127);
      }
      // Until it has exec'd, it is this process's copy.
      for (int i = 0; i < 500 && ExeOf(pid_) != "/usr/bin/sleep" && ExeOf(pid_) != "/bin/sleep";
           i++) {
        usleep(10000);
      }
      return;
    }
    pid_ = ringside::testing::StartMemoryHolder(mib, adj);
  }
  ~MemoryHolder() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  static std::string ExeOf(pid_t pid) {
    char buf[256] = {};
    const ssize_t n =
        readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  pid_t pid_ = -1;
};

class ProcessStatsDataSourceTest : public ::testing::Test {
 protected:
  ProcessStatsDataSourceTest() : producer_(1, {}, ProducerBuffer::Options{}) {}

  std::vector<trace::TracePacket> Samples() {
    return testing::CommitAndRead(&producer_, buffer_.get(), [](const trace::TracePacket& p) {
      return p.has_process_stats();
    });
  }

  // A source of `proc` (a fake one, or the machine's), started (its first
  // sample taken): processes of 32 MiB and more, sampled when flushed.
  // `bpf`: its BPF task iterator, if it loads (only on the machine's).
  std::unique_ptr<ProcessStatsDataSource> StartSource(const std::string& proc = "/proc",
                                                      bool bpf = false) {
    ProcessStatsDataSource::Config c;
    c.poll_ms = 3600000;
    c.min_rss_kb = 32 << 10;
    c.proc = proc;
    c.bpf = bpf;
    auto ds = ProcessStatsDataSource::Create(c, &producer_);
    if (!ds.ok() || !(*ds)->Start().ok()) {
      ADD_FAILURE() << "no source on " << proc << ": " << ds.status();
      return nullptr;
    }
    return std::move(*ds);
  }

  ProducerBuffer producer_;
  std::unique_ptr<buffer::TraceBuffer> buffer_ = buffer::TraceBuffer::Create(4 << 20);
};

// The machine's /proc, read by each way the source has: false, a statm
// read per process; true, the BPF task iterator (skipped, naming why,
// where it does not load).
class MachineProcTest : public ProcessStatsDataSourceTest,
                        public ::testing::WithParamInterface<bool> {
 protected:
  std::unique_ptr<ProcessStatsDataSource> StartOnMachine() {
    std::unique_ptr<ProcessStatsDataSource> ds = StartSource("/proc", GetParam());
    if (ds != nullptr && GetParam() && !ds->warnings().empty()) {
      skipped_ = ds->warnings().front();
    }
    return ds;
  }
  // Checks, once the source has sampled, that it sampled the way asked.
  void ExpectTheWayAsked(const ProcessStatsDataSource& ds) {
    if (GetParam()) {
      EXPECT_EQ(ds.stats().iterator_passes, ds.stats().samples);
    } else {
      EXPECT_EQ(ds.stats().iterator_passes, 0u);
    }
  }
  std::string skipped_;
};

std::string WayName(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "BpfIterator" : "StatmFiles";
}

// A task's directory in a fake /proc, with its statm and (unless empty)
// its status.
void MakeTask(const testing::ScratchDir& proc, const std::string& dir, const std::string& statm,
              const std::string& status) {
  ASSERT_EQ(mkdir(proc.Join(dir).c_str(), 0755), 0) << dir;
  std::ofstream(proc.Join(dir + "/statm")) << statm;
  if (!status.empty()) std::ofstream(proc.Join(dir + "/status")) << status;
}

// Task `pid` of a fake /proc replaced by the one made as `dir`: made
// before the old one goes, so that it cannot get the old inode.
void ReplaceTask(const testing::ScratchDir& proc, const std::string& pid, const std::string& dir) {
  for (const char* file : {"/statm", "/status"}) std::remove(proc.Join(pid + file).c_str());
  ASSERT_EQ(rmdir(proc.Join(pid).c_str()), 0);
  ASSERT_EQ(rename(proc.Join(dir).c_str(), proc.Join(pid).c_str()), 0);
}

// A process of 48 MiB is written with its memory and OOM score adjustment;
// a sleep(1), below min_rss_kb, is left out.
TEST_P(MachineProcTest, WritesTheProcessesAboveTheSizeWithTheirMemoryAndOomScore) {
  MemoryHolder big(48, 500), small(0, 0);
  ASSERT_GT(big.pid(), 0);
  ASSERT_GT(small.pid(), 0);
  const std::unique_ptr<ProcessStatsDataSource> ds = StartOnMachine();
  ASSERT_NE(ds, nullptr);
  if (!skipped_.empty()) GTEST_SKIP() << skipped_;
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  ds->Stop();
  ExpectTheWayAsked(*ds);
  const std::vector<trace::TracePacket> s = Samples();
  ASSERT_FALSE(s.empty());
  bool found = false;
  for (const auto& p : s.back().process_stats().processes()) {
    EXPECT_NE(p.pid(), small.pid()) << "a process below min_rss_kb was written";
    EXPECT_GE(p.vm_rss_kb(), 32u << 10) << "pid " << p.pid();
    if (p.pid() != big.pid()) continue;
    found = true;
    EXPECT_GE(p.vm_rss_kb(), 48u << 10);
    EXPECT_GE(p.rss_anon_kb(), 48u << 10);
    EXPECT_GE(p.vm_size_kb(), p.vm_rss_kb());
    EXPECT_GE(p.vm_hwm_kb(), p.vm_rss_kb());
    EXPECT_EQ(p.oom_score_adj(), 500);
  }
  EXPECT_TRUE(found) << "pid " << big.pid() << " not written";
  EXPECT_GE(s.back().process_stats().collection_end_timestamp(), s.back().timestamp());
  EXPECT_GE(ds->stats().processes_seen, 2u);
}

// A task whose statm shows no address space (a kernel thread) is read at
// the first poll only; once its directory is another (its id taken by a new
// task, here a process of 64 MiB), it is read again, and written.
TEST_F(ProcessStatsDataSourceTest, AKernelThreadIsReadOnceUntilItsIdNamesAnotherTask) {
  testing::ScratchDir proc;
  MakeTask(proc, "2", "0 0 0 0 0 0 0\n", "");
  MakeTask(proc, "40", "1000 500 100 10 0 400 0\n", "");  // 2 MiB: read every poll.
  const std::unique_ptr<ProcessStatsDataSource> ds = StartSource(proc.path());
  ASSERT_NE(ds, nullptr);
  // The start's own sample and the first flush's may be one or two: each
  // sample after the first reads task 40 alone.
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  const ProcessStatsDataSource::Stats before = ds->stats();
  ASSERT_GE(before.samples, 2u);
  EXPECT_EQ(before.processes_seen, 2 + (before.samples - 1))
      << "the kernel thread's statm was read again";

  MakeTask(proc, "new", "20000 16384 100 10 0 16000 0\n", "VmSize:\t80000 kB\nVmRSS:\t65536 kB\n");
  ReplaceTask(proc, "2", "new");
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  const ProcessStatsDataSource::Stats after = ds->stats();
  EXPECT_EQ(after.processes_seen - before.processes_seen, 2 * (after.samples - before.samples));
  ds->Stop();
  const std::vector<trace::TracePacket> s = Samples();
  ASSERT_FALSE(s.empty());
  ASSERT_EQ(s.back().process_stats().processes_size(), 1);
  EXPECT_EQ(s.back().process_stats().processes(0).pid(), 2);
  EXPECT_EQ(s.back().process_stats().processes(0).vm_rss_kb(), 65536u);
}

// Each poll reads a process's memory as it is then, here 40 MiB more at
// the second: through its statm kept open between polls, or the
// iterator's pass.
TEST_P(MachineProcTest, EachPollReadsAProcesssMemoryAsItIsThen) {
  constexpr size_t kStep = 40 << 20;
  int go[2], ready[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    char c = 0;
    for (int step = 0; step < 2; step++) {
      if (step == 1 && read(go[0], &c, 1) != 1) _exit(1);
      void* p = mmap(nullptr, kStep, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) _exit(1);
      std::memset(p, 1, kStep);
      (void)!write(ready[1], "x", 1);
    }
    for (;;) pause();
  }
  ASSERT_GT(pid, 0);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const std::unique_ptr<ProcessStatsDataSource> ds = StartOnMachine();
  const auto end_child = [&] {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    for (int fd : {go[0], go[1], ready[0], ready[1]}) close(fd);
  };
  if (ds == nullptr || !skipped_.empty()) {
    end_child();
    ASSERT_NE(ds, nullptr);
    GTEST_SKIP() << skipped_;
  }
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  ASSERT_EQ(write(go[1], "x", 1), 1);
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  ds->Stop();
  end_child();
  ExpectTheWayAsked(*ds);

  std::vector<uint64_t> rss_kb;
  for (const trace::TracePacket& s : Samples()) {
    for (const auto& p : s.process_stats().processes()) {
      if (p.pid() == pid) rss_kb.push_back(p.vm_rss_kb());
    }
  }
  // The start's own sample and the first flush's may be one or two.
  ASSERT_GE(rss_kb.size(), 2u) << "pid " << pid << " not in both polls";
  EXPECT_GE(rss_kb.back(), rss_kb.front() + (kStep >> 10) * 9 / 10)
      << "the second poll did not see the process grow";
}

// A pid whose directory is another at the next poll (its id taken by a new
// process) is read from the new one.
TEST_F(ProcessStatsDataSourceTest, AReusedPidIsReadFromItsNewProcess) {
  testing::ScratchDir proc;
  MakeTask(proc, "40", "20000 16384 100 10 0 16000 0\n", "VmRSS:\t65536 kB\n");
  const std::unique_ptr<ProcessStatsDataSource> ds = StartSource(proc.path());
  ASSERT_NE(ds, nullptr);
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  // Its statm says it is below min_rss_kb (the old one's, read, would not).
  MakeTask(proc, "new", "1000 500 100 10 0 400 0\n", "VmRSS:\t2000 kB\n");
  ReplaceTask(proc, "40", "new");
  ASSERT_TRUE(ds->FlushStaging(absl::Seconds(10)));
  ds->Stop();
  const std::vector<trace::TracePacket> s = Samples();
  ASSERT_GE(s.size(), 2u);
  EXPECT_EQ(s.front().process_stats().processes_size(), 1);
  EXPECT_EQ(s.back().process_stats().processes_size(), 0)
      << "pid 40 was read from the process that had it before";
}

INSTANTIATE_TEST_SUITE_P(EachWay, MachineProcTest, ::testing::Bool(), WayName);

TEST_F(ProcessStatsDataSourceTest, AMissingProcIsAnErrorNamingIt) {
  ProcessStatsDataSource::Config c;
  c.proc = "/nonexistent-proc";
  auto ds = ProcessStatsDataSource::Create(c, &producer_);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(std::string(ds.status().message()).find("/nonexistent-proc"), std::string::npos)
      << ds.status();
}

}  // namespace
}  // namespace ringside::agent
