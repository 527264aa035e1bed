#include "agent/sources/polled_source.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/sources/cpu_budget.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

void Wake(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

}  // namespace

PolledSource::PolledSource(ProducerBuffer* producer) : writer_(producer->CreateTraceWriter(0)) {}

absl::Status PolledSource::Init() {
  wake_fd_ = base::ScopedFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return base::ErrnoToStatus(errno, "eventfd");
  return absl::OkStatus();
}

PolledSource::~PolledSource() { Stop(); }

absl::Status PolledSource::Start() {
  if (started_) return absl::FailedPreconditionError("already started");
  started_ = true;
  flush_.Open();
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void PolledSource::Stop() {
  if (!started_ || stop_.exchange(true)) return;
  flush_.Close();
  Wake(wake_fd_.get());
  thread_.join();
  poller_state_.Claim();
  writer_->Flush();
}

bool PolledSource::FlushStaging(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  const uint64_t n = flush_.Request([this] { Wake(wake_fd_.get()); });
  if (n == 0) return false;
  return flush_.Await(n, deadline);
}

DataSource::ConsumerCpu PolledSource::consumer_cpu() const {
  return {absl::Nanoseconds(thread_cpu_ns_.load(std::memory_order_relaxed)), absl::ZeroDuration(),
          0};
}

void PolledSource::Loop() {
  pthread_setname_np(pthread_self(), "rs-polled");
  poller_state_.Claim();
  CpuBudget::ThreadMeter meter;
  while (!stop_.load()) {
    const int64_t wait_ms = std::max<int64_t>(
        0, absl::ToInt64Milliseconds(absl::Ceil(NextDue() - absl::Now(), absl::Milliseconds(1))));
    pollfd fd{wake_fd_.get(), POLLIN, 0};
    poll(&fd, 1, static_cast<int>(std::min<int64_t>(wait_ms, 3600000)));
    if (fd.revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_fd_.get(), &v, sizeof(v));
    }
    if (stop_.load()) break;
    // Taken before the poll: a request made during it waits for the next.
    const uint64_t flush = flush_.Pending();
    if (Poll(absl::Now(), flush != 0)) polls_.fetch_add(1, std::memory_order_relaxed);
    if (flush != 0) {
      writer_->Flush();
      flush_.Served(flush);
    }
    thread_cpu_ns_.fetch_add(absl::ToInt64Nanoseconds(meter.TakeUsed()), std::memory_order_relaxed);
  }
}

}  // namespace ringside::agent
