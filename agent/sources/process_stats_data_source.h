#ifndef RINGSIDE_AGENT_SOURCES_PROCESS_STATS_DATA_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_PROCESS_STATS_DATA_SOURCE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/sources/polled_source.h"
#include "agent/sources/proc_counters.h"
#include "agent/writer/producer_buffer.h"
#include "base/scoped_fd.h"
#include "bpf/process_memory.h"

namespace ringside::agent {

// The "linux.process_stats" data source: every process's memory (RSS and
// its anonymous, file and shmem parts, swap, locked, peak) and OOM score
// adjustment every period, as Perfetto's ProcessStats packets, which
// trace_processor draws as counter tracks of each process: an OOM
// snapshot shows who grew before the kill. A process's /proc/PID/statm is
// read first, and its status and oom_score_adj only when its resident
// memory is at least min_rss_kb, so that the many small processes of a
// machine cost one short read each. A task whose statm shows no address
// space (a kernel thread, or one already exited) is not read again while
// its /proc directory stays the same (the directory entry's inode: a new
// task under a reused id gets a new one): a large node has thousands of
// per-CPU kernel threads, and each was three system calls a poll. A
// process's statm stays open from poll to poll (while its directory is the
// same, and up to a quarter of RLIMIT_NOFILE of them): one pread a poll, a
// seventh of an open, read and close (0.6 against 4.2 us on a 2-CPU VM).
// An open statm names its task for good: once that task is gone, its reads
// fail, even if its id names another.
//
// Where it can, the source does without the listing and the statm reads:
// a BPF task iterator (bpf::ProcessMemory) gives every process's resident
// pages in one read, a quarter of the CPU of the /proc pass at 300
// processes and a sixth at 2000 (sys_stats_benchmark). It needs /proc to
// number tasks as the kernel does (the host's PID namespace) and the
// iterator to load, or /proc it is, and warnings() says why; a pass that
// fails leaves its sample to /proc.
class ProcessStatsDataSource : public PolledSource {
 public:
  struct Config {
    uint32_t poll_ms = 1000;
    uint64_t min_rss_kb = 16384;
    std::string proc = "/proc";  // Tests give a directory of their own.
    // The BPF task iterator, when it loads and `proc` is the host's /proc.
    bool bpf = true;
  };
  static absl::StatusOr<std::unique_ptr<ProcessStatsDataSource>> Create(Config config,
                                                                        ProducerBuffer* producer);
  ~ProcessStatsDataSource() override { Stop(); }

  struct Stats {
    uint64_t samples = 0;
    uint64_t processes_written = 0;  // Process entries, all samples.
    // Processes whose statm was read, or the iterator listed.
    uint64_t processes_seen = 0;
    uint64_t iterator_passes = 0;  // Samples taken by the BPF task iterator.
  };
  Stats stats() const;
  // Why the BPF task iterator is not used (none when it is, or when `proc`
  // is not the host's /proc).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  ProcessStatsDataSource(Config config, ProducerBuffer* producer);
  absl::Time NextDue() const override { return next_; }
  bool Poll(absl::Time now, bool all) override;
  void Sample();
  // The BPF pass: every process with memory listed, those of min_rss_kb or
  // more written. False, having written nothing, when the pass fails.
  bool SampleByIterator(ProtoMessage* stats);
  // The /proc pass.
  void SampleByProc(ProtoMessage* stats);
  // Writes pid `name`'s memory (status, oom_score_adj) into `stats`; false
  // when it is gone.
  bool WriteProcess(ProtoMessage* stats, int32_t pid, const char* name);
  // Writes one process's memory (and its OOM score adjustment, when known).
  void WriteMemory(ProtoMessage* stats, int32_t pid, const ProcessMemory& m,
                   std::optional<int64_t> oom_score_adj);
  // The text of `file` under `dir` (/proc/PID/<file> from the process's
  // directory, or PID/<file> from /proc) into text_; false when it is gone.
  bool ReadOf(int dir, const char* file);
  // Reads the statm of pid `name` (its directory's inode `ino`) into text_,
  // through the file kept open from the last poll if it is that process's,
  // and keeps it open for the next; false when the process is gone.
  bool ReadStatm(int32_t pid, const char* name, ino_t ino);
  // The whole of `fd`'s text from its start into text_; false on an error.
  bool PreadText(int fd);

  const Config config_;
  const uint64_t page_kb_;
  base::ScopedFd proc_;
  std::unique_ptr<bpf::ProcessMemory> iterator_;     // Null: /proc.
  std::vector<bpf::ProcessMemory::Process> listed_;  // A pass's, kept for its capacity.
  std::vector<std::string> warnings_;
  std::string text_;
  std::string statm_path_;  // PID/statm, kept for its capacity.
  // Tasks without memory, by pid: the inode of their /proc directory when
  // found so. The next poll's set is built as it goes, and replaces it.
  absl::flat_hash_map<int32_t, ino_t> no_memory_;
  absl::flat_hash_map<int32_t, ino_t> no_memory_next_;
  // Processes' statm kept open, by pid: the inode of their /proc directory
  // and the file. Replaced each poll by those it read, as no_memory_.
  struct OpenStatm {
    ino_t ino = 0;
    base::ScopedFd fd;
  };
  absl::flat_hash_map<int32_t, OpenStatm> statm_;
  absl::flat_hash_map<int32_t, OpenStatm> statm_next_;
  size_t max_open_statm_ = 0;  // A quarter of RLIMIT_NOFILE's soft limit.
  absl::Time next_ = absl::InfinitePast();
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> seen_{0};
  std::atomic<uint64_t> iterator_passes_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_PROCESS_STATS_DATA_SOURCE_H_
