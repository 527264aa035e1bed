#include "bpf/stack_maps.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bpf/event_source.h"
#include "bpf/stack_events.h"
#include "gtest/gtest.h"
#include "tests/bpf/testing/collector.h"

namespace ringside::bpf {
namespace {

// Kernel text lives in the top half of the address space on x86-64 and
// arm64; user code in the bottom half.
constexpr uint64_t kKernelHalf = uint64_t{1} << 63;

EventSource::Options StackOptions(uint32_t flags, uint32_t cpu_hz = 0) {
  EventSource::Options options;
  options.ring_size_per_cpu = 1 << 20;
  options.process = false;
  options.incidents = false;
  options.filters.tgids = {getpid()};  // This test's own threads.
  options.stacks.flags = flags;
  options.stacks.max_depth = 32;
  options.stacks.max_stacks = 1024;
  options.stacks.max_blocked_tasks = 1024;
  options.stacks.cpu_hz = cpu_hz;
  return options;
}

// The blocked-stack records of thread `tid` among everything drained.
std::vector<rs_stack_blocked> BlockedOf(EventSource* source, pid_t tid) {
  std::vector<rs_stack_blocked> out;
  source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) {
      rs_event_header h;
      if (r.size < sizeof(h)) continue;
      std::memcpy(&h, r.data, sizeof(h));
      if (h.type != RS_EV_STACK_BLOCKED || r.size != sizeof(rs_stack_blocked)) continue;
      rs_stack_blocked b;
      std::memcpy(&b, r.data, sizeof(b));
      if (b.pid == tid) out.push_back(b);
    }
  });
  return out;
}

// A thread that sleeps 20 ms five times: five records, each with the time
// it slept, a kernel stack of kernel addresses and a user stack of user
// ones, which the map gives back by their ids.
TEST(StackMapsTest, AThreadThatSleepsLeavesItsStacksAndItsTimeOffTheCpu) {
  constexpr uint32_t kFlags = RS_STACKS_KERNEL | RS_STACKS_USER | RS_STACKS_BLOCKED;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(kFlags));
  ASSERT_EQ(source->stacks().flags(), kFlags);
  ASSERT_TRUE(source->Attach().ok());
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 5; i++) usleep(20'000);
  });
  sleeper.join();
  std::vector<rs_stack_blocked> blocked = BlockedOf(source.get(), tid);
  source->Detach();

  int long_sleeps = 0;
  for (const rs_stack_blocked& b : blocked) {
    EXPECT_EQ(b.tgid, getpid());
    if (b.off_cpu_ns < 19'000'000) continue;  // Thread start and exit block too.
    long_sleeps++;
    ASSERT_GE(b.kernel_stack, 0);
    std::vector<uint64_t> frames;
    ASSERT_TRUE(source->stacks().Read(b.kernel_stack, &frames));
    ASSERT_GE(frames.size(), 3u);
    for (uint64_t ip : frames) EXPECT_GE(ip, kKernelHalf) << std::hex << ip;
    ASSERT_GE(b.user_stack, 0);
    ASSERT_TRUE(source->stacks().Read(b.user_stack, &frames));
    ASSERT_GE(frames.size(), 1u);
    for (uint64_t ip : frames) EXPECT_LT(ip, kKernelHalf) << std::hex << ip;
  }
  EXPECT_EQ(long_sleeps, 5) << blocked.size() << " records of the thread";
  // Nothing was lost on the way.
  for (const std::vector<uint64_t>& kind : source->stacks().losses_per_cpu()) {
    for (uint64_t n : kind) EXPECT_EQ(n, 0u);
  }
  EXPECT_EQ(source->drops(RS_EV_STACK_BLOCKED), 0u);
}

// Stacks off (the default): no record, no stack, and the maps take one
// entry each.
TEST(StackMapsTest, WithStacksOffNothingIsRecorded) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(0));
  EXPECT_EQ(source->stacks().flags(), 0u);
  ASSERT_TRUE(source->Attach().ok());
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 3; i++) usleep(5'000);
  });
  sleeper.join();
  EXPECT_TRUE(BlockedOf(source.get(), tid).empty());
  source->Detach();
  std::vector<uint64_t> frames;
  EXPECT_FALSE(source->stacks().Read(0, &frames));
}

// Kernel stacks only: the user stack id says it was not asked for.
TEST(StackMapsTest, KernelStacksAloneLeaveTheUserStackUnasked) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(RS_STACKS_KERNEL | RS_STACKS_BLOCKED));
  ASSERT_TRUE(source->Attach().ok());
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 3; i++) usleep(10'000);
  });
  sleeper.join();
  const std::vector<rs_stack_blocked> blocked = BlockedOf(source.get(), tid);
  source->Detach();
  ASSERT_FALSE(blocked.empty());
  for (const rs_stack_blocked& b : blocked) {
    EXPECT_EQ(b.user_stack, RS_STACK_NOT_ASKED);
    EXPECT_GE(b.kernel_stack, 0);
  }
}

// CPU samples at 199 Hz of a thread that spins for 300 ms: about 60 of it,
// each with its user stack (it runs in user mode), and no blocked stacks
// (not asked for).
TEST(StackMapsTest, ASpinningThreadIsSampledWithItsUserStack) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(RS_STACKS_KERNEL | RS_STACKS_USER, 199));
  ASSERT_TRUE(source->Attach().ok());
  EXPECT_GT(source->stacks().sampled_cpus(), 0u);
  std::atomic<pid_t> tid{0};
  std::thread spinner([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
  });
  spinner.join();
  int samples = 0, with_user = 0, blocked = 0;
  source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) {
      rs_event_header h;
      std::memcpy(&h, r.data, sizeof(h));
      if (h.type == RS_EV_STACK_BLOCKED) blocked++;
      if (h.type != RS_EV_STACK_CPU_SAMPLE) continue;
      rs_stack_cpu_sample c;
      ASSERT_EQ(r.size, sizeof(c));
      std::memcpy(&c, r.data, sizeof(c));
      if (c.pid != tid) continue;
      samples++;
      std::vector<uint64_t> frames;
      with_user += c.user_stack >= 0 && source->stacks().Read(c.user_stack, &frames) &&
                   !frames.empty() && frames[0] < kKernelHalf;
    }
  });
  source->Detach();
  EXPECT_EQ(source->stacks().sampled_cpus(), 0u);
  // 60 expected; a loaded machine gives the spinner less of a CPU.
  EXPECT_GE(samples, 15);
  EXPECT_GE(with_user, samples * 9 / 10);
  EXPECT_EQ(blocked, 0);
}

}  // namespace
}  // namespace ringside::bpf
