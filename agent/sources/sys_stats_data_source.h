#ifndef RINGSIDE_AGENT_SOURCES_SYS_STATS_DATA_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_SYS_STATS_DATA_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/sources/polled_source.h"
#include "agent/writer/producer_buffer.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// The "linux.sys_stats" data source: the machine's counters, read from
// /proc on a thread of its own every period and written as SysStats
// packets (Perfetto's), which trace_processor draws as counter tracks:
// /proc/meminfo, /proc/vmstat, each CPU's times and the forks of /proc/stat,
// and the stall totals of /proc/pressure/*. Each kind has its own period;
// the thread wakes at the earliest one due and writes one packet with the
// kinds due then. Its files stay open and are read again from their start.
// A snapshot's flush samples every kind (PolledSource).
class SysStatsDataSource : public PolledSource {
 public:
  struct Config {
    // 0: the kind is not read.
    uint32_t meminfo_period_ms = 0;
    std::vector<int> meminfo_counters;  // MeminfoCounters; empty: all.
    uint32_t vmstat_period_ms = 0;
    std::vector<int> vmstat_counters;  // VmstatCounters; empty: all.
    uint32_t stat_period_ms = 0;
    bool cpu_times = true;  // STAT_CPU_TIMES
    bool forks = true;      // STAT_FORK_COUNT
    uint32_t psi_period_ms = 0;
    // Where /proc is (tests give a directory of their own).
    std::string proc = "/proc";
  };

  // Opens the files of the kinds asked for. A file that cannot be opened
  // leaves its kind out, named in warnings() (a kernel without PSI); fails
  // only when no kind is left.
  static absl::StatusOr<std::unique_ptr<SysStatsDataSource>> Create(Config config,
                                                                    ProducerBuffer* producer);
  ~SysStatsDataSource() override { Stop(); }

  // Samples written (one packet each).
  uint64_t samples() const { return polls(); }
  // The kinds left out, each as its field and why ("psi_period_ms: no
  // /proc/pressure: ...").
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Reads that failed while running (a file that went away), counted.
  uint64_t read_errors() const { return read_errors_.load(); }

 private:
  enum Kind { kMeminfo, kVmstat, kStat, kPsi, kNumKinds };
  struct Psi {
    int some_resource = 0;  // SysStats.PsiSample.PsiResource
    int full_resource = 0;
    base::ScopedFd fd;
  };

  SysStatsDataSource(Config config, ProducerBuffer* producer);
  absl::Time NextDue() const override;
  bool Poll(absl::Time now, bool all) override;
  // Writes one packet with the kinds in `due` (bits of 1 << Kind).
  void Sample(unsigned due);
  void SampleStat(ProtoMessage* stats);
  void SamplePsi(ProtoMessage* stats);
  // The file's text from its start into text_; false (counted) on a
  // failed read.
  bool ReadAgain(int fd);
  uint32_t PeriodMs(Kind kind) const;

  const Config config_;
  std::vector<std::string> warnings_;
  base::ScopedFd meminfo_, vmstat_, stat_;
  std::vector<Psi> psi_;
  const uint64_t ns_per_tick_;

  std::string text_;  // Read buffer, kept between samples.
  // When each kind is due next; InfinitePast: at once (the start).
  absl::Time next_[kNumKinds] = {absl::InfinitePast(), absl::InfinitePast(), absl::InfinitePast(),
                                 absl::InfinitePast()};
  std::atomic<uint64_t> read_errors_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_SYS_STATS_DATA_SOURCE_H_
