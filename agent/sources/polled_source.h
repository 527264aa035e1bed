#ifndef RINGSIDE_AGENT_SOURCES_POLLED_SOURCE_H_
#define RINGSIDE_AGENT_SOURCES_POLLED_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/sources/data_source.h"
#include "agent/sources/staging_flush.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "base/owner_thread.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// A data source that reads files of /proc when they are due, rather than
// kernel events from staging rings (linux.sys_stats, linux.process_stats):
// one thread that sleeps until the next poll is due (or a snapshot's flush
// wakes it), polls, and writes through one TraceWriter (writer id 0). A
// snapshot's FlushStaging() polls everything at once, so that the file
// ends with the values of its moment.
//
// A subclass says when it is due next and polls; it calls Stop() in its own
// destructor (the thread calls into it).
class PolledSource : public DataSource {
 public:
  ~PolledSource() override;

  absl::Status Start() override;
  void Stop() override;
  bool FlushStaging(absl::Duration limit) override;
  ConsumerCpu consumer_cpu() const override;

  // Polls are not kernel events: the session's event counts leave them
  // out, and polls() counts them.
  bool records_kernel_events() const override { return false; }
  uint64_t events_read() const override { return 0; }
  uint64_t events_lost() const override { return 0; }
  std::vector<Loss> Losses() const override { return {}; }
  uint64_t polls() const { return polls_.load(); }

 protected:
  // Fails (kInternal) only when the wake eventfd cannot be made: call
  // Init() from the subclass's Create().
  explicit PolledSource(ProducerBuffer* producer);
  absl::Status Init();

  // On the polling thread: when the next poll is due (InfinitePast: now).
  virtual absl::Time NextDue() const = 0;
  // On the polling thread: polls what is due at `now`, or everything when
  // `all` (a snapshot's flush), writing through writer(). Returns whether
  // it wrote a packet.
  virtual bool Poll(absl::Time now, bool all) = 0;
  TraceWriter& writer() { return *writer_; }

  // The polling thread's state: checked at each poll.
  base::OwnerThread poller_state_{"a polled source's writer"};

 private:
  void Loop();

  std::unique_ptr<TraceWriter> writer_;
  base::ScopedFd wake_fd_;  // eventfd: Stop() and FlushStaging() wake the thread.
  StagingFlush flush_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
  std::atomic<uint64_t> polls_{0};
  std::atomic<int64_t> thread_cpu_ns_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_POLLED_SOURCE_H_
