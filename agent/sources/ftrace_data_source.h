#ifndef RINGSIDE_AGENT_SOURCES_FTRACE_DATA_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_FTRACE_DATA_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/config/defaults.h"
#include "agent/sources/cpu_budget.h"
#include "agent/sources/data_source.h"
#include "agent/sources/ftrace_bundle_writer.h"
#include "agent/sources/incident.h"
#include "agent/sources/staging_flush.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "base/boottime.h"
#include "base/owner_thread.h"
#include "base/scoped_fd.h"
#include "ftrace/cpu_reader.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {

// The "linux.ftrace" data source: a dedicated tracefs instance with the
// requested events, drained by one reader thread into FtraceEventBundles
// (one TraceWriter per CPU, writer id 1 + cpu; writer 0 carries the
// FtraceStats packets at start and end).
//
// The reader wakes every drain_period_ms (up to a second while the buffers
// are quiet: DrainWait), or earlier when a CPU's kernel buffer passes
// buffer_percent (poll on trace_pipe_raw), reads every CPU,
// and retries CPUs that were offline. Stop() is clean: tracing off, a last
// drain, END_OF_TRACE stats, the instance removed.
class FtraceDataSource : public DataSource {
 public:
  struct Config {
    std::string instance_name = "record";
    std::vector<ftrace::Instance::EventSpec> events;
    uint32_t buffer_size_kb = kMaxDefaultFtraceBufferSizeKb;  // Per CPU.
    uint32_t drain_period_ms = kDefaultFtraceDrainPeriodMs;
    uint32_t buffer_percent = kDefaultFtraceDrainBufferPercent;  // Wake the reader at this fill.
    bool compact_sched = kDefaultFtraceCompactSched;
    // Told of process events as they are read (may be null).
    DescriptorTracker* tracker = nullptr;
    // False: no reader thread; the caller reads with ReadKernelBuffers() (and
    // Stop() reads the rest), for embedding in a thread the caller owns.
    bool reader_thread = true;
    // max_consumer_cpu_percent, shared with the recording's other readers
    // (may be null: no limit).
    CpuBudget* cpu_budget = nullptr;
    // Told of the OOM kills and fatal signals that oom/mark_victim and
    // signal/signal_deliver (in `events`) report, on the reader thread,
    // once their events are committed (may be null).
    IncidentListener* incidents = nullptr;
  };

  struct Stats {
    uint64_t pages_read = 0;
    uint64_t pages_malformed = 0;  // Pages a parse error cut short.
    uint64_t events = 0;
    uint64_t pages_with_lost_events = 0;
    uint64_t lost_events_stored = 0;  // Sum of the counts the kernel stored.
  };

  // Creates and configures the instance. Unknown events and bad filters are
  // reported in the START_OF_TRACE stats (and enable_result()); the source
  // fails only if no event at all could be enabled or tracefs is unusable.
  static absl::StatusOr<std::unique_ptr<FtraceDataSource>> Create(const ftrace::Tracefs& tracefs,
                                                                  Config config,
                                                                  ProducerBuffer* producer);
  ~FtraceDataSource() override;

  // Turns tracing on and starts the reader thread.
  absl::Status Start() override;
  // Tracing off in the instance, every CPU at once.
  void StopRecording() override;
  // Tracing off, a last read of every CPU, END_OF_TRACE stats; idempotent.
  void Stop() override;
  // Wakes the reader thread for a read of every CPU's kernel buffer (each
  // read commits its writer's chunk). False at once without a reader thread
  // (reader_thread = false: the caller reads).
  bool FlushStaging(absl::Duration limit) override;
  uint64_t RequestStagingPass() override { return flush_.RequestInBackground(base::BoottimeNs()); }
  bool StagingPassDone(uint64_t n) override { return flush_.IsServed(n); }
  // Reads every CPU's kernel buffer once on the calling thread (what the
  // reader thread does each period). REQUIRES: reader_thread = false and
  // the thread that called Start() (the reader's state is its own:
  // OwnerThread).
  void ReadKernelBuffers();

  uint64_t events_read() const override { return events_count_.load(); }
  // The kernel's own count of what it lost (stored in the pages read).
  uint64_t events_lost() const override { return lost_stored_.load(); }
  // Overruns per CPU as of the last FtraceStats written ("ftrace_overrun").
  std::vector<Loss> Losses() const override;
  ConsumerCpu consumer_cpu() const override {
    return {pacer_.cpu(), pacer_.paused(), pacer_.pauses()};
  }
  // The events written into packets per CPU and kind, committed or dropped
  // for want of a chunk (FtraceBundleWriter::EventTallies()).
  std::vector<EventTally> EventTallies() const override;
  StagingMemory staging_memory() const override {
    return {0, uint64_t{applied_buffer_size_kb_} * 1024 * static_cast<uint64_t>(num_cpus_)};
  }

  const ftrace::Instance::EnableResult& enable_result() const { return enable_result_; }
  uint32_t applied_buffer_size_kb() const { return applied_buffer_size_kb_; }
  const std::string& applied_trace_clock() const { return applied_clock_; }
  Stats stats() const;
  // Events the kernel lost per CPU (overrun + dropped), as of the last
  // FtraceStats written (END_OF_TRACE after Stop()); only non-zero CPUs.
  std::map<int, uint64_t> overruns() const;

 private:
  FtraceDataSource(Config config, ProducerBuffer* producer)
      : config_(std::move(config)), producer_(producer) {}
  void WriteStats(int phase);
  void OpenMissingReaders();
  // Hands the bundle writer's incidents to config_.incidents, with the
  // tgid and name /proc still has of each task.
  void TellIncidents();
  void ReaderLoop();

  Config config_;
  ProducerBuffer* producer_;
  std::unique_ptr<ftrace::Instance> instance_;
  ftrace::EventTable table_;
  std::unique_ptr<ftrace::PageParser> parser_;
  std::unique_ptr<FtraceBundleWriter> bundles_;
  ftrace::Instance::EnableResult enable_result_;
  uint32_t applied_buffer_size_kb_ = 0;
  std::string applied_clock_;
  int num_cpus_ = 0;

  std::unique_ptr<TraceWriter> control_writer_;
  std::vector<std::unique_ptr<TraceWriter>> cpu_writers_;
  // The reader's state (readers_, the page and event scratch, the parser,
  // the bundle writer, cpu_writers_): Start()'s thread, then the reader
  // thread's, then Stop()'s after the join.
  base::OwnerThread reader_state_{"linux.ftrace's reader state"};
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers_;  // Null: offline / not open.

  std::thread thread_;
  // eventfd that ends the reader's poll: on Stop() and FlushStaging().
  base::ScopedFd wake_fd_;
  StagingFlush flush_;
  std::atomic<bool> stop_{false};
  // Measures the reader thread, and pauses it past the budget (if any).
  ConsumerPacer pacer_{config_.cpu_budget};
  bool started_ = false;
  bool stopped_ = false;

  // Reused per drain.
  std::vector<uint8_t> pages_;
  std::vector<ftrace::RawEvent> events_;

  mutable absl::Mutex losses_mu_;
  std::map<int, uint64_t> overruns_ ABSL_GUARDED_BY(losses_mu_);

  std::atomic<uint64_t> pages_read_{0}, pages_malformed_{0}, events_count_{0}, pages_with_lost_{0},
      lost_stored_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_FTRACE_DATA_SOURCE_H_
