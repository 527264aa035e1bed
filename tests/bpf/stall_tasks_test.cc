// The scheduling programs' stalls (bpf/stalls.bpf.h): a task held in D is
// in stall_tasks while it waits and reported as it wakes; a short block is
// not; a task kept from its CPU is reported as it runs, with that CPU; and
// with no stall asked for, nothing is followed.

#include "bpf/stall_tasks.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/boottime.h"
#include "bpf/event_source.h"
#include "bpf/records.h"
#include "gtest/gtest.h"
#include "tests/bpf/testing/collector.h"
#include "tests/testing/workloads.h"

namespace ringside::bpf {
namespace {

EventSource::Options StallOptions(uint64_t blocked_ns, uint64_t runqueue_ns) {
  EventSource::Options options;
  options.ring_size_per_cpu = 1 << 20;
  options.process = false;
  options.incidents = false;
  options.stalls.blocked_ns = blocked_ns;
  options.stalls.runqueue_ns = runqueue_ns;
  options.stalls.max_tasks = 4096;
  return options;
}

struct Stall {
  uint32_t type;
  rs_task_stall record;
};

// The stall records of `pid` drained, a few passes 20 ms apart (a pass
// stops at a record another CPU is still writing).
std::vector<Stall> StallsOf(EventSource* source, pid_t pid) {
  std::vector<Stall> out;
  for (int pass = 0; pass < 5; pass++) {
    if (pass > 0) absl::SleepFor(absl::Milliseconds(20));
    source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
      for (const RecordView& r : records) {
        RecordBatch batch;
        if (!DecodeRecord(r, &batch)) continue;
        const Record& rec = batch.records()[0];
        if (rec.type != RS_EV_TASK_BLOCKED && rec.type != RS_EV_RUNQUEUE_DELAY) continue;
        if (rec.task_stall().pid == pid) out.push_back({rec.type, rec.task_stall()});
      }
    });
  }
  return out;
}

TEST(StallTasksTest, ATaskHeldInDIsFollowedWhileItWaitsAndReportedAsItWakes) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StallOptions(500'000'000, 0));
  ASSERT_EQ(source->stalls().blocked_ns(), 500'000'000u);
  ASSERT_TRUE(source->Attach().ok());
  // 50 ms: under the threshold.
  const pid_t brief = ringside::testing::HoldInD("rskt-brief", "rskt-kid", 50);
  ASSERT_EQ(waitpid(brief, nullptr, 0), brief);
  const pid_t held = ringside::testing::HoldInD("rskt-held", "rskt-kid", 2500);
  absl::SleepFor(absl::Milliseconds(1500));
  // Still blocked: in the map, with its name, for the sweep (1 s of margin
  // for the fork and clone).
  bool found = false;
  for (const StallTasks::Blocked& b :
       source->stalls().BlockedSince(static_cast<uint64_t>(base::BoottimeNs()))) {
    if (b.tid != held) continue;
    found = true;
    EXPECT_EQ(b.task.tgid, held);
    EXPECT_EQ(std::string(CommOf(b.task.comm)), "rskt-held");
    EXPECT_GE(static_cast<uint64_t>(base::BoottimeNs()) - b.task.since_ns, 500'000'000u);
  }
  EXPECT_TRUE(found);
  ASSERT_EQ(waitpid(held, nullptr, 0), held);
  const std::vector<Stall> stalls = StallsOf(source.get(), held);
  EXPECT_TRUE(StallsOf(source.get(), brief).empty());
  source->Detach();
  ASSERT_EQ(stalls.size(), 1u);
  const rs_task_stall& s = stalls[0].record;
  EXPECT_EQ(stalls[0].type, static_cast<uint32_t>(RS_EV_TASK_BLOCKED));
  EXPECT_EQ(s.how, static_cast<uint32_t>(RS_STALL_WOKEN));
  EXPECT_EQ(std::string(CommOf(s.comm)), "rskt-held");
  // Woken by its vfork child's exit.
  EXPECT_EQ(std::string(CommOf(s.other_comm)), "rskt-kid");
  EXPECT_GE(s.h.ts_ns - s.since_ns, 2'400'000'000u);
  EXPECT_LT(s.h.ts_ns - s.since_ns, 10'000'000'000u);
  EXPECT_EQ(source->stalls().full(), 0u);
  EXPECT_EQ(source->drops(RS_EV_TASK_BLOCKED), 0u);
}

TEST(StallTasksTest, ATaskKeptFromItsCpuIsReportedWithThatCpu) {
  if (ringside::testing::PreemptRtKernel()) {
    GTEST_SKIP()
        << "real-time spinners would hold this PREEMPT_RT kernel's timer and RCU threads "
           "(of their priority) too; the kernel matrix proves run-queue delays there, in a "
           "throttled cgroup";
  }
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StallOptions(0, 50'000'000));
  EXPECT_EQ(source->stalls().blocked_ns(), 0u);
  ASSERT_TRUE(source->Attach().ok());
  const int cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  const pid_t wakee = ringside::testing::StartSleeper("rskt-wakee", cpu, 10);
  ringside::testing::ScopedProcesses sleeper({wakee});
  {
    // A real-time hog holds the CPU until the kernel's throttling lets the
    // fair task run.
    ringside::testing::ScopedProcesses hog(ringside::testing::StartSpinners(1, "rskt-hog", cpu));
    const sched_param rt{1};
    ASSERT_EQ(sched_setscheduler(hog.pids()[0], SCHED_FIFO, &rt), 0);
    absl::SleepFor(absl::Milliseconds(1500));
  }
  const std::vector<Stall> stalls = StallsOf(source.get(), wakee);
  source->Detach();
  ASSERT_FALSE(stalls.empty());
  for (const Stall& s : stalls) {
    EXPECT_EQ(s.type, static_cast<uint32_t>(RS_EV_RUNQUEUE_DELAY));
    EXPECT_EQ(s.record.h.cpu, static_cast<uint32_t>(cpu));
    EXPECT_EQ(s.record.cpu, cpu);
    EXPECT_GE(s.record.h.ts_ns - s.record.since_ns, 50'000'000u);
    EXPECT_EQ(s.record.how, static_cast<uint32_t>(RS_STALL_QUEUED));
    EXPECT_EQ(std::string(CommOf(s.record.comm)), "rskt-wakee");
  }
}

TEST(StallTasksTest, WithNoStallAskedForNothingIsFollowed) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, StallOptions(0, 0));
  ASSERT_TRUE(source->Attach().ok());
  const pid_t held = ringside::testing::HoldInD("rskt-held", "rskt-kid", 300);
  ASSERT_EQ(waitpid(held, nullptr, 0), held);
  EXPECT_TRUE(StallsOf(source.get(), held).empty());
  EXPECT_TRUE(source->stalls().BlockedSince(static_cast<uint64_t>(base::BoottimeNs())).empty());
  source->Detach();
}

}  // namespace
}  // namespace ringside::bpf
