// The BPF event source against the real kernel (root with BTF here).

#include "bpf/event_source.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bpf/records.h"
#include "bpf/task_state.h"
#include "ftrace/cpu_reader.h"
#include "ftrace/event_format.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"
#include "ftrace/tracefs.h"
#include "gtest/gtest.h"
#include "tests/bpf/testing/collector.h"
#include "tests/testing/cpu_offline.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/perf_tracepoint_counter.h"

namespace ringside::bpf {
namespace {

using testing::Collected;
using testing::CollectUntilExit;
using testing::Comm;

uint64_t BootNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A child that sleeps briefly `sleeps` times: each sleep switches it out
// and back in.
pid_t SwitchStorm(int sleeps) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < sleeps; i++) usleep(50);
    _exit(0);
  }
  return pid;
}

// A child blocked until Release(): lets a test load filters naming it
// before it does anything.
struct HeldChild {
  pid_t pid = -1;
  int release_fd = -1;
  void Release() {
    const char c = 1;
    EXPECT_EQ(write(release_fd, &c, 1), 1);
    close(release_fd);
  }
};

template <typename Body>
HeldChild ForkHeld(Body body) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    char c;
    if (read(fds[0], &c, 1) != 1) _exit(100);
    body();
    _exit(0);
  }
  close(fds[0]);
  return HeldChild{pid, fds[1]};
}

EventSource::Options WithRingSize(size_t bytes) {
  EventSource::Options options;
  options.ring_size_per_cpu = bytes;
  return options;
}

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// This thread's CPU affinity, restored at the end of the scope.
class SavedAffinity {
 public:
  SavedAffinity() { ok_ = sched_getaffinity(0, sizeof(set_), &set_) == 0; }
  ~SavedAffinity() {
    if (ok_) sched_setaffinity(0, sizeof(set_), &set_);
  }

 private:
  cpu_set_t set_;
  bool ok_ = false;
};

// A child process spinning on one CPU until stopped, so that a test's
// thread switching there switches to it and not to the idle task: a quiet
// CPU's switch to idle sends its batch (bpf/sched_batch.bpf.h), and the
// test wants the batch to wait. A test's tgid filter leaves it out.
class Spinner {
 public:
  explicit Spinner(int cpu) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      const char c = PinTo(cpu) ? 1 : 0;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      for (;;) {
      }
    }
    close(ready[1]);
    char c = 0;
    pinned_ = pid_ > 0 && read(ready[0], &c, 1) == 1 && c == 1;
    close(ready[0]);
  }
  ~Spinner() { Stop(); }
  bool pinned() const { return pinned_; }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool pinned_ = false;
};

// A drain callback collecting the records of one CPU into `c`.
RingReader::BatchCallback OnCpu(uint32_t cpu, Collected* c) {
  return [cpu, c](uint32_t from, absl::Span<const RecordView> records) {
    if (from != cpu) return;
    for (const RecordView& r : records) c->Add(from, r.data, r.size);
  };
}

// Scheduling records: what a CPU's batch holds.
size_t SchedRecords(const Collected& c) {
  return c.switches.size() + c.wakeups.size() + c.wakeups_new.size() + c.migrations.size();
}
uint64_t SchedRecordsWaiting(const EventSource& source, int cpu) {
  uint64_t n = 0;
  for (uint32_t type :
       {RS_EV_SCHED_SWITCH, RS_EV_SCHED_WAKING, RS_EV_SCHED_WAKEUP_NEW, RS_EV_SCHED_MIGRATE}) {
    n += source.records_waiting(type)[cpu];
  }
  return n;
}

// This test process's records alone, in rings of 1 MiB.
EventSource::Options OwnRecordsOnly() {
  EventSource::Options options = WithRingSize(1 << 20);
  options.filters.tgids = {getpid()};
  return options;
}

EventSource::ProgramStats StatsOf(const EventSource& source, const std::string& name) {
  for (const EventSource::ProgramStats& s : source.program_stats()) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "program " << name << " not loaded";
  return {};
}

// Kernel BPF run-time stats on for the scope (off again after, as before).
class KernelStatsScope {
 public:
  KernelStatsScope() : fd_(EventSource::EnableKernelStats()) {}
  ~KernelStatsScope() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

// The wakeup's target CPU is read from the task itself: a child pinned to one
// CPU is woken there every time, and switched in there. It renames itself
// once pinned: what came before (on any CPU, preempted before it pinned
// itself) is not counted.
TEST(EventSourceTest, AWakeupNamesTheCpuItsTaskIsQueuedOn) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  const int pinned_cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  const pid_t child = fork();
  if (child == 0) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(pinned_cpu, &cpus);
    if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) _exit(1);
    prctl(PR_SET_NAME, "rs-pinned");
    for (int i = 0; i < 200; i++) usleep(50);
    _exit(0);
  }
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  uint64_t pinned_ts = UINT64_MAX;
  for (const rs_task_rename& e : c.renames) {
    if (e.pid == child) pinned_ts = e.h.ts_ns;
  }
  ASSERT_NE(pinned_ts, UINT64_MAX) << "the child's rename was not recorded";
  uint64_t wakeups = 0, switched_in = 0;
  for (const rs_sched_wakeup& e : c.wakeups) {
    if (e.pid != child || e.h.ts_ns < pinned_ts) continue;
    wakeups++;
    EXPECT_EQ(e.target_cpu, pinned_cpu);
  }
  for (const rs_sched_switch& e : c.switches) {
    if (e.next_pid != child || e.h.ts_ns < pinned_ts) continue;
    switched_in++;
    EXPECT_EQ(static_cast<int>(e.h.cpu), pinned_cpu);
  }
  EXPECT_GE(wakeups, 150u);
  EXPECT_GE(switched_in, 150u);
}

// The whole machine's scheduling is recorded (the child's wakeup_new
// included, which a filter naming it could not catch), so under a load of
// other tasks (flake-check's hackbench and a compile: 6,064 switches lost
// once on 1 MiB rings, the reader starved for 600 ms) the rings may lose
// other tasks' records: an 8 MiB ring per CPU holds such a stall, and only
// the child's records are counted. Drops are named in the failures.
TEST(EventSourceTest, SchedulingRecordsPerCpuInOrderFromOneRingPerCpu) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(8 << 20));
  ASSERT_TRUE(source->Attach().ok());
  const pid_t child = SwitchStorm(500);
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
  uint64_t switched_out = 0, switched_in = 0, child_wakeups = 0;
  for (const rs_sched_switch& e : c.switches) {
    if (e.next_pid == child) switched_in++;
    if (e.prev_pid == child) {
      switched_out++;
      EXPECT_EQ(e.prev_tgid, child);
    }
  }
  for (const rs_sched_wakeup& e : c.wakeups) {
    if (e.pid != child) continue;
    child_wakeups++;
    EXPECT_EQ(e.tgid, child);
    EXPECT_GE(e.target_cpu, 0);
    EXPECT_LT(e.target_cpu, source->num_cpus());
  }
  // Nearly every usleep switches the child out and back in; one whose timer
  // fires before the child reaches schedule() (it was preempted in between)
  // does not block. CI saw 493 of 500. Ins and outs need not balance
  // exactly: the tracepoint skips a transition now and then (498 in, 501 out
  // seen once here; see the chain breaks below).
  std::string drops;
  for (uint32_t type = 1; type < RS_EV_MAX; type++) {
    if (source->drops(type) > 0) absl::StrAppend(&drops, " type ", type, ": ", source->drops(type));
  }
  if (drops.empty()) drops = " none";
  EXPECT_GE(switched_out, 450u) << "records the rings dropped:" << drops;
  EXPECT_GE(switched_in, 450u) << "records the rings dropped:" << drops;
  // And a timer wakes it (a few sleeps may not block).
  EXPECT_GE(child_wakeups, 400u) << "records the rings dropped:" << drops;
  bool child_started = false;
  for (const rs_sched_wakeup& e : c.wakeups_new) child_started |= e.pid == child;
  EXPECT_TRUE(child_started) << "no sched_wakeup_new for the child; records the rings dropped:"
                             << drops;
}

// The kernel's own record of the sched_switch tracepoint: an ftrace
// instance of ours (boot clock, buffers large enough to lose nothing) that
// records it next to the BPF program. Both probes of one tracepoint hit
// take their timestamps within a microsecond of each other, so over a time
// window both must hold the same switches.
//
// Except one kind: on this kernel (6.18) ftrace misses about half of the
// switches *out of the idle task* (prev_pid 0) — 7,126 of 14,722 in one
// run, while it has all 14,721 switches into idle; a system-wide
// perf_event_open tracepoint counter misses them too (3,039 counted for
// 6,041 real switches over 3,000 sleeps). The BPF program sees them: on
// each CPU its switches into and out of idle balance. So the comparisons
// with ftrace and with a perf counter (filtered to prev_pid != 0) cover
// the switches from non-idle tasks, and the balance the rest. (Within a few: ±1 for where attach
// and detach fall, and the tracepoint itself skips a transition now and then — checking that each
// switch's prev is the previous switch's next on its CPU found 3 or 4
// breaks per 48,000 switches, with no drop and every program run recorded.)
class FtraceSchedSwitchReference {
 public:
  absl::Status Start() {
    const auto& tracefs = ftrace::testing::KernelTracefs();
    if (!tracefs.ok()) return tracefs.status();
    auto instance = ftrace::Instance::Create(*tracefs, "t-bpf-ref");
    if (!instance.ok()) return instance.status();
    instance_ = std::move(*instance);
    if (auto kb = instance_->SetBufferSizeKb(32 * 1024); !kb.ok()) return kb.status();
    if (auto clock = instance_->SetTraceClock("boot"); !clock.ok()) return clock.status();
    if (instance_->EnableEvents({{"sched/sched_switch", ""}}).enabled.size() != 1) {
      return absl::UnavailableError("cannot enable sched/sched_switch");
    }
    auto page = ftrace::ParseHeaderPage(*tracefs->Read("events/header_page"));
    auto event = ftrace::ParseHeaderEvent(*tracefs->Read("events/header_event"));
    auto format =
        ftrace::ParseEventFormat("sched", *tracefs->Read("events/sched/sched_switch/format"));
    if (!page.ok() || !event.ok() || !format.ok()) {
      return absl::InternalError("cannot parse the ftrace formats");
    }
    page_ = *page;
    event_ = *event;
    switch_id_ = format->id;
    format_ = *std::move(format);
    prev_pid_ = format_.FindField("prev_pid");
    next_pid_ = format_.FindField("next_pid");
    prev_state_ = format_.FindField("prev_state");
    if (prev_pid_ == nullptr || next_pid_ == nullptr || prev_state_ == nullptr) {
      return absl::InternalError("sched_switch lacks prev_pid, next_pid or prev_state");
    }
    return instance_->SetTracingOn(true);
  }

  struct Switch {
    int cpu;
    uint64_t ts;
    int32_t prev_pid;
    int32_t next_pid;
    int64_t prev_state;  // As the tracepoint reports it.
  };

  // Stops and returns the sched_switches recorded, in order per CPU; fails
  // if the kernel reported a loss.
  absl::StatusOr<std::vector<Switch>> StopAndRead() {
    if (auto st = instance_->SetTracingOn(false); !st.ok()) return st;
    std::vector<Switch> switches;
    ftrace::PageParser parser(page_, event_);
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
      auto stats = instance_->ReadCpuStats(static_cast<int>(cpu));
      if (!stats.ok()) return stats.status();
      if (stats->overrun != 0 || stats->dropped_events != 0) {
        return absl::DataLossError(absl::StrCat("ftrace lost events on CPU ", cpu));
      }
      auto reader = ftrace::CpuReader::Open(*instance_, static_cast<int>(cpu), page_.page_size());
      if (!reader.ok()) return reader.status();
      for (;;) {
        std::vector<uint8_t> pages;
        absl::StatusOr<size_t> n = (*reader)->ReadPages(256, &pages);
        if (!n.ok()) return n.status();
        if (*n == 0) break;
        std::vector<ftrace::RawEvent> events;
        for (size_t p = 0; p < *n; p++) {
          const ftrace::PageParser::PageResult r =
              parser.Parse(pages.data() + p * page_.page_size(), page_.page_size(), &events);
          if (r.error != ftrace::PageParser::Error::kNone || r.lost_events) {
            return absl::DataLossError(absl::StrCat("bad or lossy ftrace page on CPU ", cpu));
          }
        }
        for (const ftrace::RawEvent& e : events) {
          uint16_t type;
          std::memcpy(&type, e.data, 2);
          if (type != switch_id_) continue;
          switches.push_back({static_cast<int>(cpu), e.timestamp,
                              static_cast<int32_t>(ftrace::EventTable::ReadInt(e, prev_pid_)),
                              static_cast<int32_t>(ftrace::EventTable::ReadInt(e, next_pid_)),
                              ftrace::EventTable::ReadInt(e, prev_state_)});
        }
      }
    }
    return switches;
  }

 private:
  std::unique_ptr<ftrace::Instance> instance_;
  ftrace::PageHeaderFormat page_;
  ftrace::EventHeaderFormat event_;
  uint16_t switch_id_ = 0;
  ftrace::EventFormat format_;
  const ftrace::FieldFormat* prev_pid_ = nullptr;
  const ftrace::FieldFormat* next_pid_ = nullptr;
  const ftrace::FieldFormat* prev_state_ = nullptr;
};

using ::ringside::testing::PerfTracepointCounter;

TEST(EventSourceTest, SchedSwitchCountMatchesTheKernelsOwnCountWithNoDrops) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(8 << 20));
  KernelStatsScope stats;
  ASSERT_TRUE(stats.ok()) << "BPF_ENABLE_STATS: " << std::strerror(errno);
  FtraceSchedSwitchReference reference;
  ASSERT_TRUE(reference.Start().ok());
  PerfTracepointCounter perf;
  ASSERT_TRUE(perf.Open("sched/sched_switch", "prev_pid != 0").ok());
  ASSERT_TRUE(source->Attach().ok());
  // All three record everything in [t1, t2]; perf a little more.
  perf.Enable();
  const uint64_t t1 = BootNs();
  const pid_t a = SwitchStorm(3000), b = SwitchStorm(3000);
  Collected c;
  CollectUntilExit(source.get(), a, &c);
  CollectUntilExit(source.get(), b, &c);
  const uint64_t t2 = BootNs();
  perf.Disable();
  source->Detach();
  absl::StatusOr<std::vector<FtraceSchedSwitchReference::Switch>> kernel_switches =
      reference.StopAndRead();
  ASSERT_TRUE(kernel_switches.ok()) << kernel_switches.status();
  source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  });
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
  // Each CPU's switches into and out of idle balance, but for where attach
  // and detach fall and the transitions the tracepoint itself skips (see
  // FtraceSchedSwitchReference): 3 or 4 per 48,000 switches measured idle,
  // 5 in one run of 10 beside hackbench, so a bound that grows with the
  // CPU's switches, at three times the rate measured. That every run of
  // the program is a record is checked exactly below (run_count).
  const size_t cpus = static_cast<size_t>(source->num_cpus());
  std::vector<int64_t> idle_balance(cpus, 0), switches_on(cpus, 0);
  for (const rs_sched_switch& e : c.switches) {
    idle_balance[e.h.cpu] += (e.next_pid == 0) - (e.prev_pid == 0);
    switches_on[e.h.cpu]++;
  }
  for (size_t cpu = 0; cpu < cpus; cpu++) {
    EXPECT_LE(std::abs(idle_balance[cpu]), 4 + switches_on[cpu] / 4000)
        << "CPU " << cpu << ": " << idle_balance[cpu] << " more switches into idle than out, of "
        << switches_on[cpu];
  }
  int64_t ours = 0, kernel = 0;
  for (const rs_sched_switch& e : c.switches) {
    ours += e.prev_pid != 0 && e.h.ts_ns >= t1 && e.h.ts_ns <= t2;
  }
  for (const auto& k : *kernel_switches) kernel += k.prev_pid != 0 && k.ts >= t1 && k.ts <= t2;
  // 6,000 sleeps, nearly each switching a child (not idle) out.
  EXPECT_GE(kernel, 5400);
  // A switch whose two timestamps straddle t1 or t2 counts on one side
  // only: at most one per CPU and edge.
  EXPECT_LE(std::abs(ours - kernel), 2 * source->num_cpus()) << ours << " vs " << kernel;
  // And the kernel's perf counter, open a little longer than [t1, t2] (its
  // enable and disable bracket the two clock reads). Measured here: all
  // three equal (11,464; 6,948; 7,413 in three runs).
  const int64_t counted = perf.Count();
  std::printf("non-idle sched_switch in the window: BPF %lld, ftrace %lld, perf counter %lld\n",
              static_cast<long long>(ours), static_cast<long long>(kernel),
              static_cast<long long>(counted));
  EXPECT_LE(std::abs(ours - counted), 2 * source->num_cpus() + 4) << ours << " vs " << counted;
  // Exact over the whole attachment: every run of the program is a record,
  // or ran while attached but outside the recording window.
  EXPECT_EQ(source->drops(RS_EV_SCHED_SWITCH), 0u);
  const EventSource::ProgramStats prog = StatsOf(*source, "handle_sched_switch");
  EXPECT_EQ(prog.run_count, c.switches.size() + source->not_recorded(RS_EV_SCHED_SWITCH));
  EXPECT_EQ(prog.missed, 0u);
  // The wakeups too, which share the switches' batches.
  EXPECT_EQ(source->drops(RS_EV_SCHED_WAKING), 0u);
  EXPECT_EQ(StatsOf(*source, "handle_sched_waking").run_count,
            c.wakeups.size() + source->not_recorded(RS_EV_SCHED_WAKING));
}

// A child whose tasks leave the CPU in several states: asleep (S), waiting
// for a vfork child (killable and freezable: D), preempted by spinners
// beyond the CPU count (R+), and dead (prev_state TASK_DEAD with the
// zombie's exit_state: Z or X).
// In a function of its own: nothing of the caller's lives across vfork().
__attribute__((noinline)) void VforkAndWait() {
  const pid_t v = vfork();
  if (v == 0) _exit(0);
  waitpid(v, nullptr, 0);
}

// Every task of the workload carries this name (the spinners and vfork
// children inherit it), so that a test can tell its switches from the
// machine's.
constexpr char kManyStatesComm[] = "rs-states";

pid_t ManyStatesWorkload(int rounds) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_NAME, kManyStatesComm, 0, 0, 0);
    std::vector<pid_t> spinners;
    for (long i = 0; i <= sysconf(_SC_NPROCESSORS_ONLN); i++) {
      const pid_t s = fork();
      if (s == 0) {
        const uint64_t end = BootNs() + 300'000'000;
        while (BootNs() < end) {
        }
        _exit(0);
      }
      spinners.push_back(s);
    }
    for (int i = 0; i < rounds; i++) {
      usleep(100);
      VforkAndWait();
    }
    for (pid_t s : spinners) waitpid(s, nullptr, 0);
    _exit(0);
  }
  return pid;
}

TEST(EventSourceTest, PrevStateIsWhatTheKernelsTracepointReports) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(8 << 20));
  FtraceSchedSwitchReference reference;
  ASSERT_TRUE(reference.Start().ok());
  ASSERT_TRUE(source->Attach().ok());
  const uint64_t t1 = BootNs();
  const pid_t child = ManyStatesWorkload(500);
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  const uint64_t t2 = BootNs();
  source->Detach();
  absl::StatusOr<std::vector<FtraceSchedSwitchReference::Switch>> kernel = reference.StopAndRead();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  });
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
  // Only the workload's switches (a task of it leaving the CPU or taking
  // it), and not those out of idle, which ftrace misses (see above): the
  // rest of a loaded machine is not this test's to compare.
  std::set<int32_t> workload;
  for (const rs_sched_switch& e : c.switches) {
    if (Comm(e.prev_comm) == kManyStatesComm) workload.insert(e.prev_pid);
    if (Comm(e.next_comm) == kManyStatesComm) workload.insert(e.next_pid);
  }
  auto compared_switch = [&](int32_t prev_pid, int32_t next_pid, uint64_t ts) {
    return ts >= t1 && ts <= t2 && prev_pid != 0 &&
           (workload.count(prev_pid) > 0 || workload.count(next_pid) > 0);
  };
  // The same switch through both probes: both see each CPU's switches in
  // the order they happen, so they are paired by that order, CPU by CPU.
  // Not by time: the two probes run back to back, but a vCPU can be
  // descheduled by its host between them (21-38 us apart were seen, more
  // on a loaded host), and a task can leave a CPU to the same task twice
  // within that (a vfork child switches to its parent when preempted by
  // the wakeup and again when dead), so pairing by time crossed pairs.
  std::map<int, std::vector<const rs_sched_switch*>> ours;
  for (const rs_sched_switch& e : c.switches) {
    if (compared_switch(e.prev_pid, e.next_pid, e.h.ts_ns)) ours[e.h.cpu].push_back(&e);
  }
  for (auto& [cpu, list] : ours) {
    std::stable_sort(
        list.begin(), list.end(),
        [](const rs_sched_switch* a, const rs_sched_switch* b) { return a->h.ts_ns < b->h.ts_ns; });
  }
  std::map<int, size_t> next_unpaired;
  int64_t compared = 0, unmatched = 0, differ = 0, exit_races = 0;
  std::map<int64_t, int64_t> per_state;
  std::ostringstream unmatched_notes;
  // Where the two lists part (a switch whose two timestamps straddle t1 or
  // t2 is on one side only; the tracepoint skips a transition now and
  // then), the partner is one of the next few of ours.
  constexpr size_t kLookahead = 4;
  for (const FtraceSchedSwitchReference::Switch& k : *kernel) {
    if (!compared_switch(k.prev_pid, k.next_pid, k.ts)) continue;
    const std::vector<const rs_sched_switch*>& list = ours[k.cpu];
    size_t& i = next_unpaired[k.cpu];
    size_t j = i;
    while (j < list.size() && j < i + kLookahead &&
           (list[j]->prev_pid != k.prev_pid || list[j]->next_pid != k.next_pid)) {
      j++;
    }
    if (j == list.size() || j == i + kLookahead) {
      if (unmatched++ < 10) {
        unmatched_notes << "\n  CPU " << k.cpu << ": the tracepoint's switch " << k.prev_pid
                        << " -> " << k.next_pid << " at " << k.ts << " is not among our next "
                        << kLookahead << " there"
                        << (i < list.size()
                                ? absl::StrCat(" (the next: ", list[i]->prev_pid, " -> ",
                                               list[i]->next_pid, " at ", list[i]->h.ts_ns, ")")
                                : std::string(" (we have no more)"));
      }
      continue;
    }
    const rs_sched_switch* match = list[j];
    i = j + 1;
    compared++;
    per_state[k.prev_state]++;
    // A dying task's exit_state is set by its parent's wait() on another
    // CPU, possibly between the two readers of one switch: ZOMBIE for one,
    // DEAD for the other is that race, not a wrong mapping.
    constexpr uint32_t kDead = 0x10, kZombie = 0x20;
    if ((match->prev_state == kDead && k.prev_state == kZombie) ||
        (match->prev_state == kZombie && k.prev_state == kDead)) {
      exit_races++;
      continue;
    }
    if (match->prev_state != k.prev_state) {
      if (differ++ < 10) {
        ADD_FAILURE() << "CPU " << k.cpu << ", pid " << k.prev_pid << " (" << Comm(match->prev_comm)
                      << ") -> " << k.next_pid << " at " << k.ts << " (ours at " << match->h.ts_ns
                      << "): ours 0x" << std::hex << match->prev_state << ", the tracepoint's 0x"
                      << k.prev_state;
      }
    }
  }
  std::string states;
  for (const auto& [state, n] : per_state)
    absl::StrAppend(&states, " 0x", absl::Hex(state), ":", n);
  std::printf("prev_state compared on %lld switches (%lld unmatched):%s\n",
              static_cast<long long>(compared), static_cast<long long>(unmatched), states.c_str());
  EXPECT_EQ(differ, 0);
  // The race is rare: most dying tasks are seen alike by both. Under
  // emulation its window is wider (52 of 504 in an arm64 guest under TCG);
  // a wrong mapping would make it every one.
  EXPECT_LE(exit_races * 4, per_state[0x10] + per_state[0x20] + 10) << exit_races;
  // At most one at each edge of the window, per CPU.
  EXPECT_LE(unmatched, 2 * source->num_cpus()) << unmatched_notes.str();
  // The workload's states were all there to compare.
  EXPECT_GE(compared, 1000);
  EXPECT_GT(per_state[RS_TASK_INTERRUPTIBLE], 0);
  EXPECT_GT(per_state[RS_TASK_UNINTERRUPTIBLE], 0);
  EXPECT_GT(per_state[RS_TASK_REPORT_MAX], 0);
  EXPECT_GT(per_state[0x10] + per_state[0x20], 0);  // X or Z: exit_state folded in.
}

TEST(EventSourceTest, TinyRingUnderAStormDropsExactlyWhatIsMissing) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(4096));
  KernelStatsScope stats;
  ASSERT_TRUE(stats.ok()) << "BPF_ENABLE_STATS: " << std::strerror(errno);
  ASSERT_TRUE(source->Attach().ok());
  // Nobody reads while the storm runs: the 4 KiB rings overflow.
  const pid_t child = SwitchStorm(3000);
  waitpid(child, nullptr, 0);
  source->Detach();
  Collected c;
  source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  });
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
  const uint64_t drops = source->drops(RS_EV_SCHED_SWITCH);
  const EventSource::ProgramStats prog = StatsOf(*source, "handle_sched_switch");
  EXPECT_GT(drops, 1000u);
  EXPECT_EQ(c.switches.size() + drops + source->not_recorded(RS_EV_SCHED_SWITCH), prog.run_count);
  EXPECT_EQ(c.wakeups.size() + source->drops(RS_EV_SCHED_WAKING) +
                source->not_recorded(RS_EV_SCHED_WAKING),
            StatsOf(*source, "handle_sched_waking").run_count);
  // The per-CPU counters add up to the total.
  uint64_t per_cpu_sum = 0;
  for (uint64_t d : source->drops_per_cpu(RS_EV_SCHED_SWITCH)) per_cpu_sum += d;
  EXPECT_EQ(per_cpu_sum, drops);
  // Read all at once, each type's counters are the same as read one type
  // at a time; and a CPU's total (what the reader reads on every pass, to
  // mark that CPU's next bundle) is the sum of its types.
  const std::vector<std::vector<uint64_t>> all = source->all_drops_per_cpu();
  ASSERT_EQ(all.size(), size_t{RS_EV_MAX});
  for (uint32_t type = 0; type < RS_EV_MAX; type++) {
    EXPECT_EQ(all[type], source->drops_per_cpu(type)) << "type " << type;
  }
  uint64_t all_cpus = 0;
  for (uint32_t cpu = 0; cpu < static_cast<uint32_t>(source->num_cpus()); cpu++) {
    uint64_t of_cpu = 0;
    for (uint32_t type = 0; type < RS_EV_MAX; type++) of_cpu += all[type][cpu];
    EXPECT_EQ(source->drops_of_cpu(cpu), of_cpu) << "CPU " << cpu;
    all_cpus += of_cpu;
  }
  EXPECT_GE(all_cpus, drops);
}

// Scheduling records wait in a per-CPU batch until it fills or the
// consumer drains: a drain hands out the records of a batch far from full.
TEST(EventSourceTest, ADrainHandsOutTheRecordsStillInTheirBatch) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, OwnRecordsOnly());  // Only its own few records.
  ASSERT_EQ(source->sched_batch_bytes(), uint32_t{RS_SCHED_BATCH_BYTES});
  ASSERT_TRUE(source->Attach().ok());
  // Out, woken, back in, until three wakeups and six switches came out of
  // drains. A sleep need not block (preempted for its 2 ms before it reached
  // schedule(), under flake-check's load: 5 switches and 2 wakeups after
  // three sleeps, once), so it sleeps again, up to 20 times; each drain
  // hands out what is still in a batch that never filled.
  size_t switches = 0, wakeups = 0;
  for (int i = 0; i < 20 && (switches < 6 || wakeups < 3); i++) {
    usleep(2000);
    Collected c;
    source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
      for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
    });
    EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
    size_t drained_switches = 0, drained_wakeups = 0;
    for (const rs_sched_switch& e : c.switches) {
      drained_switches += e.prev_tgid == getpid() || e.next_tgid == getpid();
    }
    for (const rs_sched_wakeup& e : c.wakeups) drained_wakeups += e.tgid == getpid();
    // No batch filled: the drain sent them.
    EXPECT_LT(
        drained_switches * sizeof(rs_sched_switch) + drained_wakeups * sizeof(rs_sched_wakeup),
        size_t{RS_SCHED_BATCH_BYTES});
    switches += drained_switches;
    wakeups += drained_wakeups;
  }
  source->Detach();
  EXPECT_GE(switches, 6u);
  EXPECT_GE(wakeups, 3u);
}

// A drain reads the rings before it sends the batches into them: a batch
// sent into a ring still full of what nobody read yet would be dropped (at
// every stop, and every snapshot's staging flush, under a storm).
TEST(EventSourceTest, ADrainOfFullRingsLosesNoWaitingBatch) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(64 * 1024));
  ASSERT_TRUE(source->Attach().ok());
  auto waiting = [&](size_t cpu) {
    uint64_t n = 0;
    for (uint32_t type = RS_EV_SCHED_SWITCH; type < RS_SCHED_BATCH_TYPES; type++) {
      n += source->records_waiting(type)[cpu];
    }
    return n;
  };
  // A CPU whose ring has no room for a whole batch, and a batch waiting
  // there: storms, nobody reading, recording paused after each, until one
  // is (a batch is empty one time in 42 or so).
  auto drops = [&] {
    uint64_t n = 0;
    for (uint32_t type = RS_EV_SCHED_SWITCH; type < RS_SCHED_BATCH_TYPES; type++) {
      n += source->drops(type);
    }
    return n;
  };
  const size_t batch_room = size_t{source->sched_batch_bytes()} + 64;
  int full_cpu = -1;
  for (int round = 0; round < 10 && full_cpu < 0; round++) {
    source->SetRecording(true);
    const pid_t child = SwitchStorm(3000);
    waitpid(child, nullptr, 0);
    source->SetRecording(false);
    for (int cpu = 0; cpu < source->num_cpus(); cpu++) {
      const size_t pending = source->reader().pending_bytes(static_cast<size_t>(cpu));
      if (waiting(static_cast<size_t>(cpu)) > 0 && pending + batch_room > source->ring_size()) {
        full_cpu = cpu;
      }
    }
  }
  ASSERT_GE(full_cpu, 0) << "no storm left a batch waiting beside a full ring";
  const uint64_t dropped_before = drops();
  const uint64_t was_waiting = waiting(static_cast<size_t>(full_cpu));
  size_t of_full_cpu = 0;
  source->Drain([&](uint32_t cpu, absl::Span<const RecordView> records) {
    if (cpu == static_cast<uint32_t>(full_cpu)) of_full_cpu += records.size();
  });
  EXPECT_EQ(drops(), dropped_before) << was_waiting << " records were waiting on CPU " << full_cpu;
  EXPECT_EQ(waiting(static_cast<size_t>(full_cpu)), 0u);
  EXPECT_GT(of_full_cpu, was_waiting);
  source->Detach();
}

// Batches are handed out as their records, never more at once than the
// reader hands out ring records: a consumer writes each call as one packet.
TEST(EventSourceTest, NoCallbackGetsMoreRecordsThanTheReadersBatch) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(8 << 20));
  ASSERT_TRUE(source->Attach().ok());
  const pid_t child = SwitchStorm(3000);  // Nobody reads while it runs.
  waitpid(child, nullptr, 0);
  source->Detach();
  size_t total = 0, most = 0;
  source->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    total += records.size();
    most = std::max(most, records.size());
  });
  EXPECT_GT(total, 3 * RingReader::kMaxBatch);
  EXPECT_LE(most, RingReader::kMaxBatch);
}

// A CPU that goes offline keeps the records waiting in its batch, which no
// drain can reach, until it comes back: then the next drain hands them out.
TEST(EventSourceTest, AnOfflineCpusBatchComesOutWhenItReturns) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two online CPUs";
  RINGSIDE_LOAD_BPF_OR_SKIP(source, OwnRecordsOnly());
  const SavedAffinity affinity;
  // Throughout: without it, nothing would wait for the CPU to go offline.
  Spinner spinner(1);
  ASSERT_TRUE(spinner.pinned()) << "the spinner could not pin itself to CPU 1";
  auto on_cpu1 = [](Collected* c) { return OnCpu(1, c); };
  auto waiting_on_cpu1 = [&source] { return SchedRecordsWaiting(*source, 1); };
  ASSERT_TRUE(source->Attach().ok());
  // A few switches and wakeups of this thread on CPU 1, fewer than a
  // batch; then off it.
  ASSERT_TRUE(PinTo(1));
  for (int i = 0; i < 3; i++) usleep(2000);
  ASSERT_TRUE(PinTo(0));
  // Gone, its switch to idle is not recorded: neither task is this process.
  spinner.Stop();
  EXPECT_GE(source->records_waiting(RS_EV_SCHED_SWITCH)[1], 6u);
  uint64_t waiting = 0, offline_at = 0;
  {
    ::ringside::testing::CpuOffline cpu1(1);
    if (!cpu1.Offline()) GTEST_SKIP() << "cannot take CPU 1 offline here (no CPU hotplug)";
    // Nothing runs on an offline CPU: what waits there is fixed until it
    // returns, and all of it happened before this.
    offline_at = BootNs();
    waiting = waiting_on_cpu1();
    Collected during;
    source->Drain(on_cpu1(&during));
    // Every scheduling record waits in the batch, the migrations off it too.
    EXPECT_EQ(SchedRecords(during), 0u);
    EXPECT_EQ(waiting_on_cpu1(), waiting);
    ASSERT_TRUE(cpu1.Online());
  }
  source->Detach();  // Nothing new from here; the drain flushes what waits.
  Collected after;
  source->Drain(on_cpu1(&after));
  EXPECT_TRUE(after.errors.empty()) << absl::StrJoin(after.errors, "\n");
  // CPU 1 records again once back (our thread's wakeups may run there):
  // the batch it kept is what happened before it went.
  uint64_t kept = 0;
  for (const rs_sched_switch& e : after.switches) kept += e.h.ts_ns < offline_at;
  for (const rs_sched_wakeup& e : after.wakeups) kept += e.h.ts_ns < offline_at;
  for (const rs_sched_wakeup& e : after.wakeups_new) kept += e.h.ts_ns < offline_at;
  for (const rs_sched_migrate& e : after.migrations) kept += e.h.ts_ns < offline_at;
  EXPECT_GE(waiting, 6u);
  EXPECT_EQ(kept, waiting);
  EXPECT_EQ(waiting_on_cpu1(), 0u);
}

// A drain for what came before a moment sends only the batches holding a
// record older than it (the buffer owner's periodic staging pass: every
// second it interrupted each CPU whose batch held anything, an IPI waking
// an idle one), and leaves a batch begun since waiting, for a later drain
// to hand out whole.
TEST(EventSourceTest, ADrainBeforeAMomentLeavesTheBatchesBegunSinceWaiting) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two online CPUs";
  RINGSIDE_LOAD_BPF_OR_SKIP(source, OwnRecordsOnly());
  const SavedAffinity affinity;
  // No idle on CPU 1 to send its batch before the drains.
  Spinner spinner(1);
  ASSERT_TRUE(spinner.pinned()) << "the spinner could not pin itself to CPU 1";
  ASSERT_TRUE(source->Attach().ok());
  ASSERT_TRUE(PinTo(0));
  source->Drain([](uint32_t, absl::Span<const RecordView>) {});
  ASSERT_EQ(SchedRecordsWaiting(*source, 1), 0u);
  // A moment, then this thread's switches, wakeups and migrations on
  // CPU 1, fewer than a batch.
  const uint64_t moment = BootNs();
  ASSERT_TRUE(PinTo(1));
  for (int i = 0; i < 3; i++) usleep(2000);
  ASSERT_TRUE(PinTo(0));
  const uint64_t waiting = SchedRecordsWaiting(*source, 1);
  Collected before;
  source->DrainBefore(moment, OnCpu(1, &before));
  Collected after;
  source->DrainBefore(BootNs(), OnCpu(1, &after));
  source->Detach();
  EXPECT_GE(waiting, 6u);
  EXPECT_EQ(SchedRecords(before), 0u) << "a batch begun after the moment was sent";
  EXPECT_TRUE(after.errors.empty()) << absl::StrJoin(after.errors, "\n");
  EXPECT_GE(SchedRecords(after), waiting);
  size_t earlier = 0;
  for (const rs_sched_switch& e : after.switches) earlier += e.h.ts_ns < moment;
  for (const rs_sched_wakeup& e : after.wakeups) earlier += e.h.ts_ns < moment;
  for (const rs_sched_migrate& e : after.migrations) earlier += e.h.ts_ns < moment;
  EXPECT_EQ(earlier, 0u);
}

// A quiet CPU switching to its idle task sends its batch, its ring having
// room: nothing would come to fill it soon, and only the reader's flush, an
// IPI that wakes the idle CPU, would send it later. Quiet: its last idle,
// from a recorded switch to idle to the switch out of it, lasted
// RS_SCHED_BATCH_LONG_IDLE_NS. With no flush at all (the rings read here by
// a reader of their own, not the source's Drain), every batch in the rings
// is full or ends with a switch to idle, and does where the CPU was quiet.
TEST(EventSourceTest, AQuietCpuGoingIdleSendsItsBatch) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, WithRingSize(8 << 20));
  ASSERT_EQ(source->sched_batch_bytes(), uint32_t{RS_SCHED_BATCH_BYTES});
  absl::StatusOr<std::unique_ptr<RingReader>> rings =
      RingReader::Create(source->ring_fds(), source->ring_size());
  ASSERT_TRUE(rings.ok()) << rings.status();
  ASSERT_TRUE(source->Attach().ok());
  for (int i = 0; i < 15; i++) usleep(20000);  // Idles longer than a quiet CPU's.
  source->SetRecording(false);
  // Per CPU, what the programs know (bpf/sched_batch.bpf.h), from the
  // switches in batches, which are in the order they happened.
  struct Cpu {
    uint64_t idle_at = 0, idle_for = 0;
  };
  std::map<uint32_t, Cpu> cpus;
  size_t quiet_sends = 0, full = 0;
  std::vector<std::string> wrong;
  (*rings)->Drain([&](uint32_t cpu, absl::Span<const RecordView> records) {
    Cpu& c = cpus[cpu];
    for (const RecordView& r : records) {
      rs_event_header batch;
      std::memcpy(&batch, r.data, sizeof(batch));
      if (batch.type != RS_EV_SCHED_BATCH) continue;
      const auto* bytes = static_cast<const uint8_t*>(r.data);
      const bool is_full = r.size - sizeof(batch) + sizeof(rs_sched_switch) > RS_SCHED_BATCH_BYTES;
      full += is_full;
      bool last_to_idle = false;
      for (size_t at = sizeof(batch); at + sizeof(rs_event_header) <= r.size;) {
        rs_event_header h;
        std::memcpy(&h, bytes + at, sizeof(h));
        ASSERT_GE(h.size, sizeof(h));
        ASSERT_LE(at + h.size, r.size);
        at += h.size;
        last_to_idle = false;
        if (h.type != RS_EV_SCHED_SWITCH) continue;
        rs_sched_switch e;
        ASSERT_GE(h.size, sizeof(e));
        std::memcpy(&e, bytes + at - h.size, sizeof(e));
        if (e.prev_pid == 0 && c.idle_at != 0) c.idle_for = e.h.ts_ns - c.idle_at;
        if (e.next_pid != 0) continue;
        c.idle_at = e.h.ts_ns;
        last_to_idle = true;
        if (c.idle_for < RS_SCHED_BATCH_LONG_IDLE_NS) continue;
        if (at == r.size) {
          quiet_sends++;
        } else {
          wrong.push_back(absl::StrCat("CPU ", cpu, ": a quiet switch to idle at ", e.h.ts_ns,
                                       " not the last of its batch"));
        }
      }
      if (!is_full && !last_to_idle) {
        wrong.push_back(absl::StrCat("CPU ", cpu, ": a batch of ", r.size - sizeof(batch),
                                     " bytes, neither full nor ending with a switch to idle"));
      }
    }
  });
  source->Detach();
  EXPECT_TRUE(wrong.empty()) << absl::StrJoin(wrong, "\n");
  if (quiet_sends == 0) {
    GTEST_SKIP() << "no CPU idled " << RS_SCHED_BATCH_LONG_IDLE_NS / 1000000
                 << " ms before a switch to idle (a loaded machine); " << full << " full batches";
  }
}

// Batching off (Options::batch_sched): each switch goes to the ring on its
// own, and is still counted exactly.
TEST(EventSourceTest, UnbatchedSwitchesAreCountedExactly) {
  EventSource::Options options = WithRingSize(8 << 20);
  options.batch_sched = false;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  EXPECT_EQ(source->sched_batch_bytes(), 0u);
  KernelStatsScope stats;
  ASSERT_TRUE(stats.ok()) << "BPF_ENABLE_STATS: " << std::strerror(errno);
  ASSERT_TRUE(source->Attach().ok());
  Collected c;
  CollectUntilExit(source.get(), SwitchStorm(1000), &c);
  source->Detach();
  source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  });
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");
  EXPECT_GE(c.switches.size(), 2000u);
  EXPECT_EQ(source->drops(RS_EV_SCHED_SWITCH), 0u);
  EXPECT_EQ(StatsOf(*source, "handle_sched_switch").run_count,
            c.switches.size() + source->not_recorded(RS_EV_SCHED_SWITCH));
}

// The three groups load as one object (bpf/all.bpf.c) when all are asked
// for, and as the groups' own objects when that fails (a kernel that refuses
// one of them): the tests of each behaviour that both must keep run both.
class OneObjectOrEachGroupTest : public ::testing::TestWithParam<bool> {
 protected:
  EventSource::Options Options(size_t ring_size = EventSource::Options{}.ring_size_per_cpu) {
    EventSource::Options options = WithRingSize(ring_size);
    options.one_object = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(EventSourceTest, OneObjectOrEachGroupTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "OneObject" : "EachGroup";
                         });

// Either way, the same programs load, every group with them.
TEST_P(OneObjectOrEachGroupTest, TheSameProgramsLoad) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, Options());
  EXPECT_EQ(source->one_object(), GetParam());
  EXPECT_TRUE(source->refused_groups().empty());
  const EventSource::Options loaded = source->loaded_groups();
  EXPECT_TRUE(loaded.sched && loaded.process && loaded.incidents);
  std::set<std::string> names;
  for (const EventSource::ProgramStats& s : source->program_stats()) names.insert(s.name);
  EventSource::Options other = Options();
  other.one_object = !GetParam();
  RINGSIDE_LOAD_BPF_OR_SKIP(other_source, other);
  std::set<std::string> other_names;
  for (const EventSource::ProgramStats& s : other_source->program_stats()) {
    other_names.insert(s.name);
  }
  EXPECT_EQ(names, other_names);
  // The scheduling, process and incident programs, and the batch flush.
  EXPECT_TRUE(names.count("handle_sched_waking"));
  EXPECT_TRUE(names.count("handle_process_fork"));
  EXPECT_TRUE(names.count("handle_signal_generate"));
  EXPECT_TRUE(names.count("flush_sched_batch"));
}

// A kernel that refuses the one object gets each group's own, all
// recording, and the reason kept for the warning the source gives.
TEST(EventSourceTest, AOneObjectThatCannotLoadFallsBackToTheGroupsOwn) {
  EventSource::Options options;
  options.refuse_one_object_for_testing = true;
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  EXPECT_FALSE(source->one_object());
  EXPECT_EQ(source->one_object_refused(), "refused for testing");
  EXPECT_TRUE(source->refused_groups().empty());
  const EventSource::Options loaded = source->loaded_groups();
  EXPECT_TRUE(loaded.sched && loaded.process && loaded.incidents);
  EXPECT_GT(source->sched_batch_bytes(), 0u);
  ASSERT_TRUE(source->Attach().ok());
  const pid_t child = SwitchStorm(20);
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  bool forked = false;
  for (const rs_process_fork& e : c.forks) forked |= e.child_pid == child;
  EXPECT_TRUE(forked);
  size_t switches = 0;
  for (const rs_sched_switch& e : c.switches) switches += e.prev_pid == child;
  EXPECT_GE(switches, 20u);

  RINGSIDE_LOAD_BPF_OR_SKIP(one, EventSource::Options{});
  EXPECT_TRUE(one->one_object());
  EXPECT_EQ(one->one_object_refused(), "");
}

TEST_P(OneObjectOrEachGroupTest, TwoHundredForkExecsOfBinTrueExactly) {
  // Rings that hold the whole run: the machine's other events (a build, a
  // storm beside the test) must not crowd these out while the reader waits.
  RINGSIDE_LOAD_BPF_OR_SKIP(source, Options(16 << 20));
  ASSERT_TRUE(source->Attach().ok());
  const pid_t parent = fork();
  if (parent == 0) {
    for (int i = 0; i < 200; i++) {
      const pid_t p = fork();
      if (p == 0) {
        execl("/bin/true", "/bin/true", "ringside-arg", static_cast<char*>(nullptr));
        _exit(127);
      }
      int st = 0;
      if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(1);
    }
    _exit(0);
  }
  Collected c;
  int status = 0;
  CollectUntilExit(source.get(), parent, &c, &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "\n");

  std::set<int32_t> forked;
  for (const rs_process_fork& e : c.forks) {
    if (e.parent_tgid != parent) continue;
    EXPECT_EQ(e.parent_pid, parent);
    EXPECT_EQ(e.child_pid, e.child_tgid);  // Processes, not threads.
    forked.insert(e.child_pid);
  }
  EXPECT_EQ(forked.size(), 200u) << source->drops(RS_EV_PROCESS_FORK) << " forks dropped";
  const std::string argv("/bin/true\0ringside-arg\0", 23);
  std::set<int32_t> execd;
  for (const rs_process_exec& e : c.execs) {
    if (e.ppid != parent) continue;
    EXPECT_EQ(std::string(e.filename, e.filename_len), "/bin/true");
    EXPECT_EQ(std::string(e.argv, e.argv_len), argv);
    EXPECT_EQ(Comm(e.comm), "true");
    EXPECT_EQ(e.uid, getuid());
    EXPECT_EQ(e.pid, e.tgid);
    EXPECT_EQ(e.old_pid, e.pid);
    EXPECT_TRUE(forked.count(e.pid)) << "exec of pid " << e.pid << " without its fork";
    execd.insert(e.pid);
  }
  EXPECT_EQ(execd.size(), 200u);
  std::set<int32_t> exited;
  for (const rs_process_exit& e : c.exits) {
    if (!forked.count(e.tgid)) continue;
    EXPECT_EQ(e.exit_code, 0);
    EXPECT_TRUE(e.group_dead);
    EXPECT_EQ(Comm(e.comm), "true");
    exited.insert(e.pid);
  }
  EXPECT_EQ(exited.size(), 200u);
  // The parent itself exits last, with code 0, and is the last of its group.
  bool parent_exit = false;
  for (const rs_process_exit& e : c.exits) parent_exit |= e.pid == parent && e.group_dead;
  EXPECT_TRUE(parent_exit);
}

TEST(EventSourceTest, RenameIsRecordedWithOldAndNewComm) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  // The child starts with our comm; other processes' renames (anything else
  // running here) are in the collection too, so compare with this, not them.
  char parent_comm[16] = {};
  ASSERT_EQ(prctl(PR_GET_NAME, parent_comm, 0, 0, 0), 0);
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, "rs-renamed", 0, 0, 0);
    _exit(0);
  }
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  int found = 0;
  for (const rs_task_rename& e : c.renames) {
    if (e.pid != child) continue;
    found++;
    EXPECT_EQ(Comm(e.new_comm), "rs-renamed");
    EXPECT_EQ(Comm(e.old_comm), std::string(parent_comm));
  }
  EXPECT_EQ(found, 1);
}

// A reaped task is freed once a grace period has passed: recorded once,
// with the pid, comm and priority it had, after its exit.
TEST(EventSourceTest, AReapedTaskIsFreedOnceAfterItsExit) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, "rs-freed", 0, 0, 0);
    _exit(0);
  }
  Collected c;
  CollectUntilExit(source.get(), child, &c);
  auto add = [&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  };
  auto frees_of_child = [&] {
    int n = 0;
    for (const rs_process_free& e : c.frees) n += e.pid == child;
    return n;
  };
  // The free comes after the reap, in an RCU callback, a grace period
  // later (milliseconds here, seconds with lazy RCU): wait for it.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (frees_of_child() == 0 && absl::Now() < deadline) {
    ASSERT_TRUE(source->Poll(10, add).ok());
  }
  source->Drain(add);
  ASSERT_TRUE(c.errors.empty()) << absl::StrJoin(c.errors, "; ");
  ASSERT_EQ(frees_of_child(), 1) << "frees recorded: " << c.frees.size();
  uint64_t exit_ts = 0;
  for (const rs_process_exit& e : c.exits) {
    if (e.pid == child) exit_ts = e.h.ts_ns;
  }
  ASSERT_NE(exit_ts, 0u) << "the child's exit was not recorded";
  for (const rs_process_free& e : c.frees) {
    if (e.pid != child) continue;
    EXPECT_EQ(e.tgid, child);
    EXPECT_EQ(Comm(e.comm), "rs-freed");
    EXPECT_GT(e.h.ts_ns, exit_ts) << "freed before it exited";
    // The task the freeing ran in (ftrace's common_pid): never the dead one.
    EXPECT_NE(e.current_pid, child);
    if (sched_getscheduler(0) == SCHED_OTHER) {
      EXPECT_EQ(e.prio, 120 + getpriority(PRIO_PROCESS, 0)) << "the kernel's prio: 120 + nice";
    }
  }
}

// This process's cgroup v2 id (the inode of its cgroup's directory), which
// its children inherit; 0 when there is no cgroup2 hierarchy.
uint64_t OwnCgroupId() {
  std::string root;  // /sys/fs/cgroup, or .../unified on hybrid systems.
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (root.empty() && std::getline(mounts, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() >= 3 && f[2] == "cgroup2") root = f[1];
  }
  std::ifstream in("/proc/self/cgroup");
  while (!root.empty() && std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    struct stat st;
    if (stat((root + line.substr(3)).c_str(), &st) == 0) return st.st_ino;
  }
  return 0;
}

// An incident wakes a reader that waits on quiet rings at once: the agent
// then waits up to a second between passes (DrainWait), and a trigger
// should not. The kill comes while Poll() waits 20 s; only the incident's
// forced wakeup (rs_submit_now) ends the wait early, as the machine's
// other records stay far below a quarter of a ring.
TEST(EventSourceTest, AnIncidentWakesAReaderWaitingOnQuietRings) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  HeldChild victim = ForkHeld([] { pause(); });
  ASSERT_GT(victim.pid, 0);
  // Wakeups that came before (the attach's records): consumed first.
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(source->Poll(1, [](uint32_t, absl::Span<const RecordView>) {}).ok());
  }
  std::thread killer([pid = victim.pid] {
    absl::SleepFor(absl::Milliseconds(300));
    kill(pid, SIGKILL);
  });
  bool killed_seen = false;
  const absl::Time start = absl::Now();
  const auto on_batch = [&](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& v : records) {
      RecordBatch one;
      if (!DecodeRecord(v, &one)) continue;
      const Record& r = one.records()[0];
      killed_seen |= r.type == RS_EV_FATAL_SIGNAL && r.fatal_signal().target_pid == victim.pid;
    }
  };
  absl::Duration waited;
  while (!killed_seen && absl::Now() - start < absl::Seconds(20)) {
    ASSERT_TRUE(source->Poll(20000, on_batch).ok());
    waited = absl::Now() - start;
  }
  killer.join();
  int status = 0;
  waitpid(victim.pid, &status, 0);
  close(victim.release_fd);
  EXPECT_TRUE(killed_seen) << "no fatal_signal record of pid " << victim.pid;
  EXPECT_LT(waited, absl::Seconds(5)) << "the incident did not wake the waiting reader";
}

TEST(EventSourceTest, FatalSignalsAndCoreDumpsAreIncidents) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  // A segfault: the kernel sends SIGSEGV to the faulting task itself.
  const pid_t segv = fork();
  if (segv == 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    // A real fault on a page without access, with the default action (the
    // sanitizers install SIGSEGV handlers of their own).
    signal(SIGSEGV, SIG_DFL);
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *static_cast<volatile int*>(page) = 1;
    _exit(0);
  }
  // A kill from us.
  HeldChild victim = ForkHeld([] { pause(); });
  ASSERT_GT(victim.pid, 0);
  kill(victim.pid, SIGKILL);
  // abort() with core dumps allowed, in a directory we remove afterwards
  // (core_pattern is the kernel's; we leave it alone).
  char dir[] = "/tmp/ringside-core-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const pid_t aborter = fork();
  if (aborter == 0) {
    const rlimit core{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &core);
    if (chdir(dir) != 0) _exit(1);
    abort();
  }
  Collected c;
  int segv_status = 0, kill_status = 0, abort_status = 0;
  CollectUntilExit(source.get(), segv, &c, &segv_status);
  CollectUntilExit(source.get(), victim.pid, &c, &kill_status);
  CollectUntilExit(source.get(), aborter, &c, &abort_status);
  std::filesystem::remove_all(dir);
  close(victim.release_fd);
  ASSERT_TRUE(WIFSIGNALED(segv_status) && WTERMSIG(segv_status) == SIGSEGV);
  ASSERT_TRUE(WIFSIGNALED(kill_status) && WTERMSIG(kill_status) == SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(abort_status) && WTERMSIG(abort_status) == SIGABRT);

  // Incidents name the task's cgroup, for triggers that filter by it.
  const uint64_t cgroup = OwnCgroupId();
  int segv_seen = 0, kill_seen = 0, abort_seen = 0;
  for (const rs_fatal_signal& e : c.signals) {
    if (cgroup != 0 && (e.target_pid == segv || e.target_pid == aborter)) {
      EXPECT_EQ(e.target_cgroup_id, cgroup);
    }
    if (e.target_pid == segv) {
      segv_seen++;
      EXPECT_EQ(e.sig, SIGSEGV);
      EXPECT_EQ(e.sender_pid, segv);  // A fault: the task signals itself.
      EXPECT_EQ(e.si_code, SEGV_ACCERR);
    } else if (e.target_pid == victim.pid) {
      kill_seen++;
      EXPECT_EQ(e.sig, SIGKILL);
      EXPECT_EQ(e.sender_tgid, getpid());
      EXPECT_EQ(e.target_tgid, victim.pid);
    } else if (e.target_pid == aborter) {
      abort_seen++;
      EXPECT_EQ(e.sig, SIGABRT);
      EXPECT_EQ(e.sender_pid, aborter);
    }
  }
  EXPECT_EQ(segv_seen, 1);
  EXPECT_EQ(kill_seen, 1);
  EXPECT_EQ(abort_seen, 1);
  // The exits carry the signals; only the aborter may have dumped core.
  for (const rs_process_exit& e : c.exits) {
    if (e.pid == segv) {
      EXPECT_EQ(e.exit_code, SIGSEGV);
    } else if (e.pid == victim.pid) {
      EXPECT_EQ(e.exit_code, SIGKILL);
    }
  }
  const bool dumped = WCOREDUMP(abort_status);
  int core_seen = 0;
  for (const rs_core_dump& e : c.core_dumps) {
    EXPECT_NE(e.pid, segv);
    if (e.pid != aborter) continue;
    core_seen++;
    EXPECT_EQ(e.sig, SIGABRT);
    if (cgroup != 0) {
      EXPECT_EQ(e.cgroup_id, cgroup);
    }
  }
  EXPECT_EQ(core_seen, dumped ? 1 : 0);
}

// Loads with `options` (filters meant to select `child` only), makes
// switches of our own that must not be recorded, then releases the child and
// collects until it exits: every sched_switch recorded involves the child.
void RecordOnlyTheChild(const EventSource::Options& options, HeldChild child, Collected* c) {
  // On a skip or failure before the release: let the child go and reap it.
  struct LetGo {
    HeldChild* child;
    bool released = false;
    ~LetGo() {
      if (released) return;
      close(child->release_fd);
      waitpid(child->pid, nullptr, 0);
    }
  } let_go{&child};
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  ASSERT_TRUE(source->Attach().ok());
  const pid_t other = SwitchStorm(100);
  waitpid(other, nullptr, 0);
  child.Release();
  let_go.released = true;
  CollectUntilExit(source.get(), child.pid, c);
  EXPECT_GT(c->switches.size(), 500u);
  for (const rs_sched_switch& e : c->switches) {
    ASSERT_TRUE(e.prev_tgid == child.pid || e.next_tgid == child.pid)
        << e.prev_tgid << " -> " << e.next_tgid;
  }
}

TEST(EventSourceTest, TgidFilterKeepsOnlyThatProcess) {
  HeldChild child = ForkHeld([] {
    for (int i = 0; i < 300; i++) usleep(50);
    const pid_t grandchild = fork();
    if (grandchild == 0) _exit(0);
    waitpid(grandchild, nullptr, 0);
  });
  ASSERT_GT(child.pid, 0);
  EventSource::Options options;
  options.filters.tgids = {child.pid};
  Collected c;
  RecordOnlyTheChild(options, child, &c);
  if (IsSkipped() || HasFatalFailure()) return;
  for (const rs_sched_wakeup& e : c.wakeups) ASSERT_EQ(e.tgid, child.pid);
  ASSERT_EQ(c.forks.size(), 1u);
  EXPECT_EQ(c.forks[0].parent_tgid, child.pid);
}

TEST(EventSourceTest, DetachedSourceRecordsNothingNew) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  source->Detach();
  source->Drain([](uint32_t, absl::Span<const RecordView>) {});
  const pid_t child = SwitchStorm(200);
  waitpid(child, nullptr, 0);
  uint64_t records = source->Drain([](uint32_t, absl::Span<const RecordView>) {});
  EXPECT_EQ(records, 0u);
}

// Recording stops at one moment for every program, while they are still
// attached (detaching them takes a grace period each); it can start again.
TEST_P(OneObjectOrEachGroupTest, RecordingOffStopsEveryProgramAtOnceWhileAttached) {
  RINGSIDE_LOAD_BPF_OR_SKIP(source, Options());
  ASSERT_TRUE(source->Attach().ok());
  source->SetRecording(false);
  source->Drain([](uint32_t, absl::Span<const RecordView>) {});
  // Switches, wakeups, a fork, a rename, an exec and exits: none recorded.
  const pid_t off = fork();
  if (off == 0) {
    prctl(PR_SET_NAME, "rs-off", 0, 0, 0);
    execl("/bin/true", "/bin/true", static_cast<char*>(nullptr));
    _exit(127);
  }
  waitpid(off, nullptr, 0);
  const pid_t storm = SwitchStorm(100);
  waitpid(storm, nullptr, 0);
  Collected c;
  source->Drain([&c](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) c.Add(cpu, r.data, r.size);
  });
  EXPECT_EQ(c.total, 0u);
  for (uint32_t type = 1; type < RS_EV_MAX; type++) EXPECT_EQ(source->drops(type), 0u) << type;
  // Each is counted as outside the window instead: 100 sleeps are at
  // least 100 switches of the storm's child away.
  EXPECT_GE(source->not_recorded(RS_EV_SCHED_SWITCH), 100u);
  EXPECT_GE(source->not_recorded(RS_EV_PROCESS_FORK), 2u);
  EXPECT_GE(source->not_recorded(RS_EV_PROCESS_EXEC), 1u);
  EXPECT_GE(source->not_recorded(RS_EV_TASK_RENAME), 1u);
  EXPECT_GE(source->not_recorded(RS_EV_PROCESS_EXIT), 2u);

  source->SetRecording(true);
  const pid_t on = fork();
  if (on == 0) _exit(0);
  CollectUntilExit(source.get(), on, &c);
  bool forked = false;
  for (const rs_process_fork& e : c.forks) forked |= e.child_pid == on;
  EXPECT_TRUE(forked);
  source->Detach();
}

TEST(EventSourceTest, MovingATaskToAnotherCpuIsAMigration) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two online CPUs";
  HeldChild child = ForkHeld([] {
    for (int cpu : {0, 1, 0}) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
      usleep(1000);
    }
  });
  ASSERT_GT(child.pid, 0);
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  child.Release();
  Collected c;
  CollectUntilExit(source.get(), child.pid, &c);
  std::set<int32_t> destinations;
  for (const rs_sched_migrate& e : c.migrations) {
    if (e.pid != child.pid) continue;
    EXPECT_NE(e.orig_cpu, e.dest_cpu);
    destinations.insert(e.dest_cpu);
  }
  // It had to move to CPU 1 and back to CPU 0 (to 0 first, unless it ran there).
  EXPECT_TRUE(destinations.count(1)) << c.migrations.size() << " migrations";
  EXPECT_TRUE(destinations.count(0));
}

// The rings wake their reader when a quarter full, and only then: a burst
// ends a long wait at once; after it, a few records wait for the drain
// period (with the kernel's default wakeups the first record after a drain
// would end the wait: per-event wakeups cost 4.6 us per sched_switch here).
TEST(EventSourceTest, AQuarterFullRingWakesTheReaderAndAFewRecordsDoNot) {
  HeldChild busy = ForkHeld([] {
    for (int i = 0; i < 2000; i++) usleep(20);
  });
  HeldChild quiet = ForkHeld([] {
    for (int i = 0; i < 5; i++) usleep(1000);
  });
  ASSERT_GT(busy.pid, 0);
  ASSERT_GT(quiet.pid, 0);
  EventSource::Options options;
  options.ring_size_per_cpu = 64 * 1024;  // A quarter: ~150 switch records.
  options.filters.tgids = {busy.pid, quiet.pid};
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  ASSERT_TRUE(source->Attach().ok());
  uint64_t records = 0;
  auto count = [&records](uint32_t, absl::Span<const RecordView> batch) {
    records += batch.size();
  };

  busy.Release();
  uint64_t start = BootNs();
  ASSERT_TRUE(source->Poll(20000, count).ok());
  EXPECT_LT(BootNs() - start, 10'000'000'000u) << "a quarter-full ring did not wake the reader";
  EXPECT_GE(records, 100u);
  waitpid(busy.pid, nullptr, 0);
  source->Drain(count);
  ASSERT_TRUE(source->Poll(0, count).ok());  // Wakeups that came during the drain.

  quiet.Release();
  waitpid(quiet.pid, nullptr, 0);  // Its few records are in the rings now.
  records = 0;
  start = BootNs();
  ASSERT_TRUE(source->Poll(600, count).ok());
  EXPECT_GE(BootNs() - start, 500'000'000u) << "a few records woke the reader";
  EXPECT_GE(records, 10u);  // ...and the drain after the wait took them.
}

TEST(EventSourceTest, WakeEndsABlockedPollAtOnce) {
  EventSource::Options options;
  options.filters.tgids = {1 << 30};  // Nothing matches: the rings stay empty.
  RINGSIDE_LOAD_BPF_OR_SKIP(source, options);
  ASSERT_TRUE(source->Attach().ok());
  source->Wake();
  const uint64_t start = BootNs();
  absl::StatusOr<uint64_t> n = source->Poll(10000, [](uint32_t, absl::Span<const RecordView>) {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_LT(BootNs() - start, 5'000'000'000ull);
}

// A source closes every descriptor it opened (maps, rings, the reader's
// epoll and eventfd, the objects' programs and links) when destroyed,
// attached or not, and so does a load that fails half-way.
TEST_P(OneObjectOrEachGroupTest, ASourceLeavesNoDescriptorOpen) {
  auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  const auto before = open_fds();
  {
    RINGSIDE_LOAD_BPF_OR_SKIP(source, Options());
    ASSERT_TRUE(source->Attach().ok());
    EXPECT_GT(open_fds(), before + source->num_cpus());
  }
  EXPECT_EQ(open_fds(), before);
  EventSource::Options too_many = Options();
  too_many.filters.tgids.assign(RS_MAX_FILTER_TGIDS + 1, 1);
  EXPECT_FALSE(EventSource::Load(too_many).ok());
  EventSource::Options none_loads = Options();
  none_loads.refuse_groups_for_testing = {Group::kSched, Group::kProcess, Group::kIncidents};
  EXPECT_FALSE(EventSource::Load(none_loads).ok());
  EXPECT_EQ(open_fds(), before);
}

// Nothing of ours stays in the kernel once the process that loaded it is
// gone, even when it never ran a destructor.
TEST(EventSourceTest, NoProgramsOrMapsLeftAfterTheLoadingProcessExits) {
  // What the child loads: the objects that appear while it runs (another
  // ringside on the machine may have objects of the same names).
  const auto before = testing::LoadedBpfObjects();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(EventSource::Options{});
    char ok = s.ok() && (*s)->Attach().ok() ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();  // Killed below: no destructor runs.
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  std::map<std::pair<std::string, uint32_t>, std::string> ours;
  for (const auto& [key, name] : testing::LoadedBpfObjects()) {
    const bool our_name = name.rfind("handle_", 0) == 0 || name.rfind("rs_", 0) == 0;
    if (our_name && !before.count(key)) ours[key] = name;
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (!ok) GTEST_SKIP() << "needs BPF (the child could not load the programs)";
  EXPECT_GE(ours.size(), 10u);  // 13 programs, the ring array, rings, drops.
  // The kernel frees programs and maps after an RCU grace period.
  auto left = [&ours] {
    std::vector<std::string> names;
    const auto now = testing::LoadedBpfObjects();
    for (const auto& [key, name] : ours) {
      if (now.count(key)) names.push_back(absl::StrCat(key.first, " ", key.second, " ", name));
    }
    return names;
  };
  std::vector<std::string> still = left();
  for (int i = 0; i < 300 && !still.empty(); i++) {
    usleep(10 * 1000);
    still = left();
  }
  EXPECT_TRUE(still.empty()) << "still loaded: " << absl::StrJoin(still, ", ");
}

}  // namespace
}  // namespace ringside::bpf

namespace ringside::bpf {
namespace {

// Where a cgroup hierarchy is mounted: the cgroup2 one (`v2`), or the v1
// hierarchy of `controller`. Empty if none.
std::string CgroupMount(bool v2, const std::string& controller = "") {
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, opts, rest;
  while (mounts >> dev >> dir >> type >> opts) {
    std::getline(mounts, rest);
    if (v2 && type == "cgroup2") return dir;
    if (!v2 && type == "cgroup") {
      for (absl::string_view o : absl::StrSplit(opts, ',')) {
        if (o == controller) return dir;
      }
    }
  }
  return "";
}

bool WriteFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  return f.good();
}

// A cgroup of our own, removed (after its processes are gone) at the end.
class ScopedCgroup {
 public:
  explicit ScopedCgroup(const std::string& parent) {
    if (parent.empty()) return;
    path_ = absl::StrCat(parent, "/ringside-test-", getpid());
    if (mkdir(path_.c_str(), 0755) != 0) path_.clear();
  }
  ~ScopedCgroup() {
    if (!path_.empty()) rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  uint64_t id() const {
    struct stat st;
    return stat(path_.c_str(), &st) == 0 ? st.st_ino : 0;
  }

 private:
  std::string path_;
};

TEST(EventSourceTest, OomKillInAMemoryCgroupIsAnIncident) {
  // The memory controller of cgroup v1 here; cgroup2's elsewhere.
  const std::string v1 = CgroupMount(false, "memory");
  ScopedCgroup cg(v1.empty() ? CgroupMount(true) : v1);
  const std::string limit = v1.empty() ? "/memory.max" : "/memory.limit_in_bytes";
  if (cg.path().empty() || !WriteFile(cg.path() + limit, "33554432")) {  // 32 MiB
    GTEST_SKIP() << "needs a memory cgroup (the v1 memory controller, or cgroup2 with memory)";
  }
  // No swapping out of the limit, where the kernel offers the knob.
  WriteFile(cg.path() + (v1.empty() ? "/memory.swap.max" : "/memory.memsw.limit_in_bytes"),
            v1.empty() ? "0" : "33554432");
  RINGSIDE_LOAD_BPF_OR_SKIP(source, EventSource::Options{});
  ASSERT_TRUE(source->Attach().ok());
  HeldChild hog = ForkHeld([] {
    // Touch 256 MiB; the cgroup's OOM killer ends this long before.
    for (int i = 0; i < 256; i++) {
      char* p = static_cast<char*>(malloc(1 << 20));
      if (p == nullptr) _exit(2);
      std::memset(p, i, 1 << 20);
    }
    _exit(3);
  });
  ASSERT_GT(hog.pid, 0);
  ASSERT_TRUE(WriteFile(cg.path() + "/cgroup.procs", std::to_string(hog.pid)));
  hog.Release();
  Collected c;
  int status = 0;
  CollectUntilExit(source.get(), hog.pid, &c, &status);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  int victims = 0;
  for (const rs_oom_kill& e : c.ooms) {
    if (e.pid != hog.pid) continue;
    victims++;
    EXPECT_EQ(e.tgid, hog.pid);
    EXPECT_EQ(e.uid, getuid());
  }
  EXPECT_EQ(victims, 1);
  // The kill itself is a fatal signal to the victim.
  int kills = 0;
  for (const rs_fatal_signal& e : c.signals) kills += e.target_pid == hog.pid && e.sig == SIGKILL;
  EXPECT_GE(kills, 1);
}

TEST(EventSourceTest, CgroupFilterKeepsOnlyTasksOfThatCgroup) {
  ScopedCgroup cg(CgroupMount(true));
  if (cg.path().empty()) GTEST_SKIP() << "needs a cgroup2 hierarchy to create a cgroup in";
  HeldChild child = ForkHeld([] {
    for (int i = 0; i < 300; i++) usleep(50);
  });
  ASSERT_GT(child.pid, 0);
  ASSERT_TRUE(WriteFile(cg.path() + "/cgroup.procs", std::to_string(child.pid)));
  EventSource::Options options;
  options.filters.cgroup_id = cg.id();
  Collected c;
  RecordOnlyTheChild(options, child, &c);
}

}  // namespace
}  // namespace ringside::bpf
