#include "bpf/stack_maps.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bpf/event_source.h"
#include "bpf/records.h"
#include "bpf/stack_events.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bpf/testing/collector.h"

namespace ringside::bpf {
namespace {

using ::testing::HasSubstr;

// Kernel text lives in the top half of the address space on x86-64 and
// arm64; user code in the bottom half.
constexpr uint64_t kKernelHalf = uint64_t{1} << 63;

EventSource::Options StackOptions(uint32_t flags, uint32_t cpu_hz = 0,
                                  uint64_t blocked_period_ns = 0) {
  EventSource::Options options;
  options.ring_size_per_cpu = 1 << 20;
  options.process = false;
  options.incidents = false;
  options.filters.tgids = {getpid()};  // This test's own threads.
  options.stacks.flags = flags;
  options.stacks.max_depth = 32;
  options.stacks.max_blocked_tasks = 1024;
  options.stacks.blocked_period_ns = blocked_period_ns;
  options.stacks.cpu_hz = cpu_hz;
  return options;
}

// A blocked-stack record and the frames it carries.
struct Blocked {
  struct {
    int32_t tgid;
    uint64_t off_cpu_ns;
    uint64_t weight_ns;
    int16_t kernel_status;
    int16_t user_status;
  } record;
  std::vector<uint64_t> kernel;
  std::vector<uint64_t> user;
};

// The blocked-stack records of thread `tid` among everything drained. The
// programs wrote them in the thread's switches, each run ending before the
// thread ran on: once it is joined, they are all in the rings.
std::vector<Blocked> BlockedOf(EventSource* source, pid_t tid) {
  std::vector<Blocked> out;
  source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) {
      RecordBatch batch;
      if (!DecodeRecord(r, &batch) || batch.records()[0].type != RS_EV_STACK_BLOCKED) continue;
      const rs_stack_blocked& b = batch.records()[0].stack_blocked();
      if (b.pid != tid) continue;
      const StackFrames f = FramesOf(b, r.size);
      out.push_back({{b.tgid, b.off_cpu_ns, b.weight_ns, b.kernel_status, b.user_status},
                     {f.kernel.begin(), f.kernel.end()},
                     {f.user.begin(), f.user.end()}});
    }
  });
  return out;
}

// A thread that sleeps 40 ms five times: five records, each with the time
// it slept as its weight, a kernel stack of kernel addresses and a user
// stack of user ones. A sleep's time off the CPU starts at its switch, not
// at the syscall that armed its timer: on a loaded TCG guest the two were
// once over 1 ms apart (one of five 20 ms sleeps measured under 19 ms), so
// a sleep counts as one from half its length.
//
// Or counted lost: a kernel can skip a switch's tracepoint (a 6.18 guest
// never reported a switch out of one process's threads, and so the switch
// in after it, ftrace's own events missing them too; this test, under
// ASan, lost one sleep in about a hundred runs that way), and without
// kprobes the block's record is written there. Every sleep whose switch
// out was reported (the sleeper's always were) is a record or a count of
// stack_resume_unseen.
TEST(StackMapsTest, AThreadThatSleepsLeavesItsStacksAndItsTimeOffTheCpu) {
  constexpr uint32_t kFlags = RS_STACKS_KERNEL | RS_STACKS_USER | RS_STACKS_BLOCKED;
  constexpr uint64_t kSleepNs = 40'000'000;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(kFlags));
  ASSERT_EQ(source->stacks().flags(), kFlags);
  ASSERT_TRUE(source->Attach().ok());
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 5; i++) usleep(kSleepNs / 1000);
  });
  sleeper.join();
  std::vector<Blocked> blocked = BlockedOf(source.get(), tid);
  source->Detach();

  int long_sleeps = 0;
  std::string off_cpu_ms;  // For a failure's message.
  for (const Blocked& b : blocked) {
    absl::StrAppend(&off_cpu_ms, " ", b.record.off_cpu_ns / 1e6);
    EXPECT_EQ(b.record.tgid, getpid());
    EXPECT_EQ(b.record.weight_ns, b.record.off_cpu_ns) << "period 0: every block, unsampled";
    if (b.record.off_cpu_ns < kSleepNs / 2) continue;  // Thread start and exit block too.
    long_sleeps++;
    EXPECT_EQ(b.record.kernel_status, RS_STACK_TAKEN);
    ASSERT_GE(b.kernel.size(), 3u);
    for (uint64_t ip : b.kernel) EXPECT_GE(ip, kKernelHalf) << std::hex << ip;
    EXPECT_EQ(b.record.user_status, RS_STACK_TAKEN);
    ASSERT_GE(b.user.size(), 1u);
    for (uint64_t ip : b.user) EXPECT_LT(ip, kKernelHalf) << std::hex << ip;
  }
  // Blocks of this process's threads that ran again unseen (the main
  // thread's too); no other loss.
  uint64_t unseen = 0;
  const std::vector<std::vector<uint64_t>> losses = source->stacks().losses_per_cpu();
  for (uint32_t kind = 0; kind < losses.size(); kind++) {
    for (uint64_t n : losses[kind]) {
      if (kind == RS_STACK_LOSS_RESUME_UNSEEN) {
        unseen += n;
      } else {
        EXPECT_EQ(n, 0u) << "loss kind " << kind;
      }
    }
  }
  // At least: a thread's start or exit stalled as long would add one.
  EXPECT_GE(static_cast<uint64_t>(long_sleeps) + unseen, 5u)
      << blocked.size() << " records of the thread, off the CPU (ms):" << off_cpu_ms << "; "
      << unseen << " blocks ran again unseen";
  EXPECT_GE(long_sleeps, 3) << "a skipped switch is rare: most sleeps are there";
  EXPECT_EQ(source->drops(RS_EV_STACK_BLOCKED), 0u);
  EXPECT_EQ(source->stacks().unsampled().blocks, 0u);
}

// With a sampling period of 10 ms, a thread that blocks 2,000 times for
// about 100 us and 5 times for 30 ms: every long block is there with its
// own length, a share of the short ones (about 2% each) weighing 10 ms
// each, and the rest counted as not sampled.
TEST(StackMapsTest, ShortBlocksAreSampledAndWeighThePeriod) {
  constexpr uint32_t kFlags = RS_STACKS_KERNEL | RS_STACKS_USER | RS_STACKS_BLOCKED;
  constexpr uint64_t kPeriod = 10'000'000;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(kFlags, 0, kPeriod));
  ASSERT_EQ(source->stacks().blocked_refused(), "");
  if (source->stacks().resume_function().empty()) {
    GTEST_SKIP() << "this kernel has no kprobes (no /sys/bus/event_source/devices/kprobe): "
                    "blocked threads' stacks are taken at the switch, every block";
  }
  ASSERT_TRUE(source->Attach().ok());
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 2000; i++) usleep(100);
    for (int i = 0; i < 5; i++) usleep(30'000);
  });
  sleeper.join();
  const std::vector<Blocked> blocked = BlockedOf(source.get(), tid);
  const StackMaps::Unsampled unsampled = source->stacks().unsampled();
  source->Detach();
  // A 100 us sleep stalled past the period (a loaded TCG guest) is long
  // too, and weighs its own length; the 30 ms ones are among those past
  // 15 ms (all five, and a rare short one stalled as long).
  int long_blocks = 0, short_blocks = 0;
  for (const Blocked& b : blocked) {
    if (b.record.off_cpu_ns >= kPeriod) {
      if (b.record.off_cpu_ns >= 15'000'000) long_blocks++;
      EXPECT_EQ(b.record.weight_ns, b.record.off_cpu_ns);
    } else {
      short_blocks++;
      EXPECT_EQ(b.record.weight_ns, kPeriod);
    }
  }
  EXPECT_GE(long_blocks, 5);
  // 2,000 blocks of 100-200 us sampled at 1-2% each: about 20-40 of them;
  // far fewer than all, and not none.
  EXPECT_GT(short_blocks, 0);
  EXPECT_LT(short_blocks, 400);
  EXPECT_GT(unsampled.blocks, 1500u) << "other threads' blocks count too";
  EXPECT_GT(unsampled.ns, 0u);
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
  const std::vector<Blocked> blocked = BlockedOf(source.get(), tid);
  source->Detach();
  ASSERT_FALSE(blocked.empty());
  for (const Blocked& b : blocked) {
    EXPECT_EQ(b.record.user_status, RS_STACK_NOT_ASKED);
    EXPECT_TRUE(b.user.empty());
    EXPECT_EQ(b.record.kernel_status, RS_STACK_TAKEN);
    EXPECT_FALSE(b.kernel.empty());
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
      RecordBatch batch;
      ASSERT_TRUE(DecodeRecord(r, &batch));
      const rs_stack_cpu_sample& c = batch.records()[0].stack_cpu_sample();
      if (c.pid != tid) continue;
      samples++;
      const StackFrames f = FramesOf(c, r.size);
      with_user += c.user_status == RS_STACK_TAKEN && !f.user.empty() && f.user[0] < kKernelHalf;
    }
  });
  source->Detach();
  EXPECT_EQ(source->stacks().sampled_cpus(), 0u);
  // 60 expected; a loaded machine gives the spinner less of a CPU.
  EXPECT_GE(samples, 15);
  EXPECT_GE(with_user, samples * 9 / 10);
  EXPECT_EQ(blocked, 0);
}

// Detached and attached again (a recording's stop and start), the sampler
// samples again: its perf events stay open across a Detach (libbpf closes
// the fd it was given with the link, so it must be given a copy).
TEST(StackMapsTest, CpuSamplingStartsAgainAfterADetach) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StackOptions(RS_STACKS_KERNEL, 199));
  ASSERT_TRUE(source->Attach().ok());
  source->Detach();
  source->Drain([](uint32_t, absl::Span<const RecordView>) {});
  absl::Status again = source->Attach();
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_GT(source->stacks().sampled_cpus(), 0u);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
  int samples = 0;
  source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) {
      rs_event_header h;
      std::memcpy(&h, r.data, sizeof(h));
      samples += h.type == RS_EV_STACK_CPU_SAMPLE;
    }
  });
  source->Detach();
  // 40 expected on this thread alone in 200 ms.
  EXPECT_GE(samples, 5);
}

// Blocked stacks not allowed at the switch (a config's `stacks {}`, which
// does not write `blocked: true`): on a kernel with kprobes the kprobe
// takes them; on one without, none are taken, the reason names the missing
// kprobes and the field that would take them anyway, and CPU samples are
// still taken.
TEST(StackMapsTest, BlockedStacksGoWithoutKprobesUnlessAllowedAtTheSwitch) {
  EventSource::Options options =
      StackOptions(RS_STACKS_BLOCKED | RS_STACKS_KERNEL | RS_STACKS_USER, 99);
  options.stacks.at_switch_allowed = false;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  const bool kprobes = !ProbeableResumeFunction().empty();
  EXPECT_FALSE(source->stacks().blocked_at_switch());
  if (kprobes) {
    EXPECT_NE(source->stacks().flags() & RS_STACKS_BLOCKED, 0u);
    EXPECT_FALSE(source->stacks().resume_function().empty());
  } else {
    EXPECT_EQ(source->stacks().flags() & RS_STACKS_BLOCKED, 0u);
    EXPECT_THAT(source->stacks().blocked_refused(), HasSubstr("no kprobes"));
    EXPECT_THAT(source->stacks().blocked_refused(), HasSubstr("blocked: true"));
  }
  ASSERT_TRUE(source->Attach().ok());
  EXPECT_GT(source->stacks().sampled_cpus(), 0u);
  source->Detach();
}

// The kprobe goes on finish_task_switch() under the name this kernel gives
// it: its own, else a clone the compiler made, never its cold part or a
// module's symbol.
TEST(StackMapsTest, TheResumeFunctionIsFoundUnderItsCloneName) {
  EXPECT_EQ(FindResumeFunction("ffffffff81000000 T _stext\n"
                               "ffffffff810a0000 t finish_task_switch.isra.0.cold\n"
                               "ffffffff810b0000 t finish_task_switch.isra.0\n"),
            "finish_task_switch.isra.0");
  EXPECT_EQ(FindResumeFunction("ffffffff810b0000 t finish_task_switch.isra.0\n"
                               "ffffffff810c0000 t finish_task_switch\n"),
            "finish_task_switch");
  EXPECT_EQ(FindResumeFunction("ffffffffc0000000 t finish_task_switch [some_module]\n"
                               "ffffffff810c0000 t finish_task_switch_other\n"),
            "");
}

// Each record's frames are read within its size, whatever its counts say.
TEST(StackMapsTest, FramesNeverReachPastTheRecord) {
  std::vector<uint64_t> words(sizeof(rs_stack_cpu_sample) / 8 + 3, 0);
  rs_stack_cpu_sample& c = *reinterpret_cast<rs_stack_cpu_sample*>(words.data());
  c.kernel_frames = 2;
  c.user_frames = 60000;  // A lie: one more fits.
  const StackFrames f = FramesOf(c, words.size() * 8);
  EXPECT_EQ(f.kernel.size(), 2u);
  EXPECT_EQ(f.user.size(), 1u);
  c.kernel_frames = 9;
  EXPECT_EQ(FramesOf(c, words.size() * 8).kernel.size(), 3u);
  EXPECT_EQ(FramesOf(c, words.size() * 8).user.size(), 0u);
  EXPECT_TRUE(FramesOf(c, 4).kernel.empty()) << "a size below the layout holds no frame";
}

}  // namespace
}  // namespace ringside::bpf
