// max_consumer_cpu_percent on the real kernel: under a scheduling storm the
// readers stay within their CPU budget, and what they could not read in
// time is dropped by the kernel and counted, not lost silently.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

struct StormRun {
  double process_cpu_s = 0;  // What the whole `ringside record` used.
  uint64_t reader_cpu_ns = 0;
  uint64_t reader_paused_ns = 0;
  uint64_t reader_pauses = 0;
  uint64_t staged_losses = 0;
  uint64_t sched_events = 0;
};

// `ringside record` of linux.bpf's scheduling for `seconds` under a pipe
// storm, with `percent` as the budget (0: none).
StormRun RecordUnderStorm(const ScratchDir& dir, uint32_t percent, int seconds) {
  const std::string config = dir.Join(absl::StrCat("budget", percent, ".pbtxt"));
  const std::string out = dir.Join(absl::StrCat("budget", percent, ".pftrace"));
  FILE* f = fopen(config.c_str(), "w");
  EXPECT_NE(f, nullptr);
  fputs(absl::StrCat(R"pb(
                       buffers { size_kb: 16384 }
                       data_sources {
                         config {
                           name: "linux.bpf"
                           bpf_config { process: false incidents: false ring_size_kb: 16 }
                         }
                       }
                       max_consumer_cpu_percent:)pb",
                     percent, "\n")
            .c_str(),
        f);
  fclose(f);
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  pid_t pid = -1;
  RunRingside({"record", "-c", config, "-o", out, "-t", absl::StrCat(seconds, "s")}, &pid,
              /*wait=*/false);
  int status = 0;
  rusage ru = {};
  wait4(pid, &status, 0, &ru);
  ringside::testing::StopProcesses(storm);
  StormRun r;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "record exited " << status;
  r.process_cpu_s =
      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  const trace::Trace trace = ReadTraceFile(out);
  for (const trace::TracePacket& p : trace.packet()) {
    if (p.has_ftrace_events()) {
      r.sched_events +=
          static_cast<uint64_t>(p.ftrace_events().compact_sched().switch_timestamp_size() +
                                p.ftrace_events().compact_sched().waking_timestamp_size() +
                                p.ftrace_events().event_size());
    }
    if (!p.has_trace_stats()) continue;
    r = StormRun{r.process_cpu_s, 0, 0, 0, 0, r.sched_events};  // The last stats are the totals.
    for (const auto& s : p.trace_stats().ringside_producer_stats()) {
      if (s.data_source() != "linux.bpf") continue;
      r.reader_cpu_ns = s.consumer_cpu_ns();
      r.reader_paused_ns = s.consumer_paused_ns();
      r.reader_pauses = s.consumer_pauses();
    }
    for (const auto& l : p.trace_stats().ringside_staging_loss())
      r.staged_losses += l.events_lost();
  }
  return r;
}

TEST(ConsumerBudgetTest, AStormIsReadWithinTheBudgetAndWhatItDropsIsCounted) {
  if (geteuid() != 0) GTEST_SKIP() << "linux.bpf needs root (CAP_BPF, CAP_PERFMON)";
  ScratchDir dir;
  constexpr int kSeconds = 4;
  const StormRun unlimited = RecordUnderStorm(dir, 0, kSeconds);
  // 1% of a CPU reads about 70,000 events a second here, half of what the
  // storm makes on an idle machine (more under load, when each costs more).
  const StormRun limited = RecordUnderStorm(dir, 1, kSeconds);
  SCOPED_TRACE(absl::StrCat("unlimited: process ", unlimited.process_cpu_s, " s, reader ",
                            unlimited.reader_cpu_ns / 1e9, " s, losses ", unlimited.staged_losses,
                            "; limited: process ", limited.process_cpu_s, " s, reader ",
                            limited.reader_cpu_ns / 1e9, " s, paused ",
                            limited.reader_paused_ns / 1e9, " s, losses ", limited.staged_losses));
  std::printf(
      "consumer budget, %d s of a 2-pair pipe storm: unlimited reader %.3f s CPU "
      "(process %.2f s), %llu staged losses; at 1%%: reader %.3f s CPU, paused %.2f s in "
      "%llu pauses (process %.2f s), %llu staged losses\n",
      kSeconds, unlimited.reader_cpu_ns / 1e9, unlimited.process_cpu_s,
      static_cast<unsigned long long>(unlimited.staged_losses), limited.reader_cpu_ns / 1e9,
      limited.reader_paused_ns / 1e9, static_cast<unsigned long long>(limited.reader_pauses),
      limited.process_cpu_s, static_cast<unsigned long long>(limited.staged_losses));
  ASSERT_GT(unlimited.sched_events, 0u);
  // The unlimited reader needs more than twice the budget for this storm, or
  // the comparison proves nothing.
  ASSERT_GT(unlimited.reader_cpu_ns, uint64_t{kSeconds} * 10'000'000 * 2);
  EXPECT_EQ(unlimited.reader_pauses, 0u);

  // 1% of kSeconds, plus the burst allowance (1% of 0.5 s), plus the last
  // pass before the budget could act and the final drain at stop, which
  // reads what the rings still hold without a budget.
  EXPECT_LT(limited.reader_cpu_ns,
            uint64_t{kSeconds} * 10'000'000 + 5'000'000 + unlimited.reader_cpu_ns / (kSeconds * 2));
  EXPECT_GT(limited.reader_pauses, 0u);
  EXPECT_GT(limited.reader_paused_ns, uint64_t{kSeconds} * 500'000'000);
  // What the paused reader left in the 16 KiB rings, the kernel dropped and
  // counted; the agent as a whole used less CPU.
  EXPECT_GT(limited.staged_losses, unlimited.staged_losses);
  EXPECT_LT(limited.process_cpu_s, unlimited.process_cpu_s);
  EXPECT_GT(limited.sched_events, 0u);
}

}  // namespace
}  // namespace ringside::agent::testing
