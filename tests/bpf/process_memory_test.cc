// bpf::ProcessMemory on the real kernel: one pass of the task iterator
// against what /proc says of the same processes.

#include "bpf/process_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/testing/workloads.h"

namespace ringside::bpf {
namespace {

// Resident pages of `pid` as /proc/PID/statm says (its second field).
uint64_t StatmResident(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident;
}

// The pass by tgid; fails the test on a tgid listed twice.
std::map<int32_t, uint64_t> Pass(ProcessMemory* pm) {
  std::vector<ProcessMemory::Process> listed;
  const absl::Status st = pm->Read(&listed);
  EXPECT_TRUE(st.ok()) << st;
  std::map<int32_t, uint64_t> by_tgid;
  for (const ProcessMemory::Process& p : listed) {
    EXPECT_TRUE(by_tgid.emplace(p.tgid, p.resident_pages).second) << "tgid " << p.tgid << " twice";
  }
  return by_tgid;
}

// Loaded, or the test skipped naming why (root and the kernel's BTF).
std::unique_ptr<ProcessMemory> LoadOrSkipReason(std::string* why) {
  absl::StatusOr<std::unique_ptr<ProcessMemory>> pm = ProcessMemory::Load();
  if (!pm.ok()) {
    *why = std::string(pm.status().message());
    return nullptr;
  }
  return *std::move(pm);
}

// A process is listed once, with statm's resident pages, and grows by what
// it faults in; a thread is not listed apart, nor is kthreadd (pid 2, a
// kernel thread: no address space).
TEST(ProcessMemoryTest, ListsEachProcessOnceWithStatmsResidentPages) {
  std::string why;
  std::unique_ptr<ProcessMemory> pm = LoadOrSkipReason(&why);
  if (pm == nullptr) GTEST_SKIP() << why;
  const pid_t child = testing::StartMemoryHolder(48);
  ASSERT_GT(child, 0);
  absl::Notification listed;
  std::atomic<pid_t> thread_id{0};
  std::thread thread([&] {
    thread_id = gettid();
    listed.WaitForNotification();
  });
  while (thread_id.load() == 0) usleep(1000);

  const uint64_t statm = StatmResident(child);
  std::map<int32_t, uint64_t> pass = Pass(pm.get());
  listed.Notify();
  thread.join();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  ASSERT_EQ(pass.count(child), 1u) << "the child is not listed";
  // The child touches nothing more: the same pages, give or take the
  // counters' per-CPU batching.
  EXPECT_NEAR(static_cast<double>(pass[child]), static_cast<double>(statm), 256);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_GE(pass[child], (48u << 20) / page);
  ASSERT_EQ(pass.count(getpid()), 1u) << "this process is not listed";
  EXPECT_EQ(pass.count(thread_id.load()), 0u) << "a thread was listed as a process";
  EXPECT_EQ(pass.count(2), 0u) << "kthreadd, a kernel thread, is listed";

  // 64 MiB more, touched: the next pass sees them.
  const size_t bytes = 64 << 20;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, bytes);
  const uint64_t grown = Pass(pm.get())[getpid()];
  munmap(p, bytes);
  EXPECT_GE(grown, pass[getpid()] + bytes / page * 9 / 10);
}

// `key`'s value in kB in /proc/PID/status ("VmRSS:\t  1234 kB"), -1 if
// it has no such line.
int64_t StatusKb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

// What a process's record holds is what /proc/PID/status and
// oom_score_adj say of it, each counter of a child that holds 48 MiB of
// anonymous memory and 8 MiB of shared memory, and keeps still, in kB as
// status shows it.
TEST(ProcessMemoryTest, EachCounterIsWhatStatusSays) {
  std::string why;
  std::unique_ptr<ProcessMemory> pm = LoadOrSkipReason(&why);
  if (pm == nullptr) GTEST_SKIP() << why;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    // Only system calls here: the fork of a threaded process.
    const int adj = open("/proc/self/oom_score_adj", O_WRONLY);
    if (adj < 0 || write(adj, "300", 3) != 3) _exit(1);
    close(adj);
    const size_t anon = 48 << 20, shared = 8 << 20;
    void* a = mmap(nullptr, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* s = mmap(nullptr, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || s == MAP_FAILED) _exit(1);
    std::memset(a, 1, anon);
    std::memset(s, 1, shared);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);

  std::vector<ProcessMemory::Process> listed;
  const absl::Status st = pm->Read(&listed);
  std::map<std::string, int64_t> status;
  for (const char* key :
       {"VmSize", "VmLck", "VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "VmSwap"}) {
    status[key] = StatusKb(child, key);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(st.ok()) << st;

  const ProcessMemory::Process* p = nullptr;
  for (const ProcessMemory::Process& l : listed) {
    if (l.tgid == child) p = &l;
  }
  ASSERT_NE(p, nullptr) << "the child is not listed";
  const int64_t kb = sysconf(_SC_PAGESIZE) / 1024;
  EXPECT_EQ(p->oom_score_adj, 300);
  // The resident counters are per-CPU batched: what the kernel shows (in
  // status as here) may lag what was touched by up to a batch a CPU (64
  // pages here at most), and two reads differ by as much.
  const double slack = 256.0 * static_cast<double>(kb);
  EXPECT_NEAR(static_cast<double>(p->anon_pages * kb), status["RssAnon"], slack);
  EXPECT_NEAR(static_cast<double>(p->file_pages * kb), status["RssFile"], slack);
  EXPECT_NEAR(static_cast<double>(p->shmem_pages * kb), status["RssShmem"], slack);
  EXPECT_NEAR(static_cast<double>(p->resident_pages * kb), status["VmRSS"], slack);
  EXPECT_GE(static_cast<double>(p->anon_pages * kb), (48 << 10) - slack);
  EXPECT_GE(static_cast<double>(p->shmem_pages * kb), (8 << 10) - slack);
  EXPECT_EQ(p->resident_pages, p->anon_pages + p->file_pages + p->shmem_pages);
  EXPECT_EQ(static_cast<int64_t>(p->swap_entries * kb), status["VmSwap"]);
  EXPECT_EQ(static_cast<int64_t>(p->total_vm * kb), status["VmSize"]);
  EXPECT_EQ(static_cast<int64_t>(p->locked_vm * kb), status["VmLck"]);
  EXPECT_NEAR(static_cast<double>(std::max(p->hiwater_rss, p->resident_pages) * kb),
              status["VmHWM"], slack);
}

}  // namespace
}  // namespace ringside::bpf
