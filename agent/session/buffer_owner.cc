#include "agent/session/buffer_owner.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/time/time.h"
#include "agent/config/defaults.h"
#include "agent/session/cpu_hotplug_watch.h"
#include "agent/session/service_packets.h"
#include "base/boottime.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

// How often the owner thread moves committed chunks into the buffers when
// nobody asks sooner. Nothing waits for this move: a writer whose pool runs
// low asks for one, and every reader of the buffers (a snapshot, the file
// drain, the stop) moves first. So it is slow: each wake of this thread
// costs the idle agent about as much as the move itself.
constexpr int64_t kMoveChunksPeriodNs = 1'000'000'000;
// How often the owner thread looks for CPUs gone offline or back.
constexpr int64_t kCpuHotplugPeriodNs = 1'000'000'000;
// How often the owner thread writes a clock snapshot into the first buffer
// by default (builtin_data_sources.snapshot_interval_ms): whatever window of
// the ring a file holds, its BOOTTIME is tied to REALTIME within the last
// 10 s, as files of other machines are lined up on REALTIME.
constexpr int64_t kDefaultClockSnapshotPeriodNs = 10'000'000'000;

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The next due time after `due` that is in the future: a period missed (a
// slow disk) is skipped, not run twice.
int64_t NextDue(int64_t due, int64_t period, int64_t now) {
  due += period;
  return due > now ? due : now + period;
}

}  // namespace

BufferOwner::BufferOwner(const config::TraceConfig& config, SessionBuffers* buffers,
                         BuiltSources* sources, DescriptorTracker* tracker,
                         std::function<void(std::string)> notice)
    : config_(config),
      buffers_(buffers),
      sources_(sources),
      tracker_(tracker),
      notice_(std::move(notice)) {
  if (buffers_->count() > 0 && !config.builtin_data_sources().disable_clock_snapshotting()) {
    ProducerBuffer::Options clock_options;
    clock_options.num_chunks = 4;
    clock_options.policy = PoolExhaustedPolicy::kDrop;
    clock_producer_ = std::make_unique<ProducerBuffer>(
        kClockProducerId, buffer::ClientIdentity{getuid(), getpid()}, clock_options);
    clock_writer_ = clock_producer_->CreateTraceWriter(1);
  }
}

void BufferOwner::Start(SessionStream* drain_into) {
  owner_ = std::thread([this] { OwnerLoop(); });
  if (drain_into != nullptr) drain_ = std::thread([this, drain_into] { DrainLoop(drain_into); });
  // Readers whose pool runs low ask the owner to commit, and wait for it.
  for (SourceSlot& slot : sources_->slots) {
    slot.producer->AttachCommitter([this] {
      absl::MutexLock lock(&stop_mu_);
      commit_requested_ = true;
    });
  }
}

void BufferOwner::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (SourceSlot& slot : sources_->slots) slot.producer->DetachCommitter();
  {
    absl::MutexLock lock(&stop_mu_);
    stop_requested_ = true;
  }
  if (owner_.joinable()) owner_.join();
  if (drain_.joinable()) drain_.join();
}

void BufferOwner::WriteClockSnapshot() {
  if (clock_writer_ == nullptr) return;
  const TracePacket clocks = ClockSnapshotPacket();
  {
    TraceWriter::PacketHandle packet = clock_writer_->NewTracePacket();
    packet->AppendVarInt(TracePacket::kTimestampFieldNumber, clocks.timestamp());
    packet->AppendString(TracePacket::kClockSnapshotFieldNumber,
                         clocks.clock_snapshot().SerializeAsString());
  }
  clock_writer_->Flush();
}

void BufferOwner::MoveChunksIntoBuffers() {
  buffers_->CommitQueued(sources_->slots, clock_producer_.get(), tracker_);
}

void BufferOwner::Flush() {
  // Before any lock: it may read the node's pod directories.
  if (tracker_ != nullptr) tracker_->RefreshPodNames(base::BoottimeNs());
  absl::MutexLock lock(&staging_mu_);
  std::vector<SourceSlot>& slots = sources_->slots;
  staging_passes_.resize(slots.size(), 0);
  bool staged = true;  // Every source read its rings since the last Flush() asked.
  for (size_t i = 0; i < slots.size(); i++) {
    if (slots[i].source != nullptr && !slots[i].source->StagingPassDone(staging_passes_[i])) {
      staged = false;
    }
  }
  for (SourceSlot& slot : slots) slot.producer->ScrapeWriters();
  MoveChunksIntoBuffers();
  // Everything the sources had read before the last Flush() (and so every
  // event that happened before it) is in the buffers now: the durable store
  // may pin the ends it was told of before then to this position. Without
  // a finished pass of every source, this drain does not count.
  if (staged) buffers_->MarkDurableDrained();
  for (size_t i = 0; i < slots.size(); i++) {
    staging_passes_[i] = slots[i].source != nullptr ? slots[i].source->RequestStagingPass() : 0;
  }
}

void BufferOwner::OwnerLoop() {
  pthread_setname_np(pthread_self(), "rs-owner");
  const int64_t flush_ns = int64_t{config_.flush_period_ms()} * 1'000'000;
  const int64_t start = MonotonicNs();
  int64_t next_move = start + kMoveChunksPeriodNs;
  int64_t next_flush = flush_ns > 0 ? start + flush_ns : INT64_MAX;
  int64_t next_cpu_check = start + kCpuHotplugPeriodNs;
  const uint32_t clocks_ms = config_.builtin_data_sources().snapshot_interval_ms();
  const int64_t clocks_ns =
      clocks_ms > 0 ? int64_t{std::max(clocks_ms, kMinClockSnapshotIntervalMs)} * 1'000'000
                    : kDefaultClockSnapshotPeriodNs;
  int64_t next_clocks = clock_writer_ != nullptr ? start + clocks_ns : INT64_MAX;
  CpuHotplugWatch cpu_watch;
  while (true) {
    const int64_t wake = std::min({next_move, next_flush, next_clocks});
    bool commit_requested = false;
    bool stopping = false;
    {
      absl::MutexLock lock(&stop_mu_);
      const int64_t wait = wake - MonotonicNs();
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stop_mu_) {
        return stop_requested_ || commit_requested_;
      };
      if (wait > 0) stop_mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Nanoseconds(wait));
      stopping = stop_requested_;
      std::swap(commit_requested, commit_requested_);
    }
    if (stopping) {
      // A CPU that went or came back since the last check is told too: the
      // notices of a recording end with the machine as it ended.
      for (std::string& line : cpu_watch.Poll()) notice_(std::move(line));
      return;
    }
    const int64_t now = MonotonicNs();
    if (now >= next_clocks) {
      WriteClockSnapshot();  // Committed by the move or flush below.
      next_clocks = NextDue(next_clocks, clocks_ns, now);
      commit_requested = true;
    }
    if (now >= next_flush) {
      Flush();
      next_flush = NextDue(next_flush, flush_ns, now);
      next_move = now + kMoveChunksPeriodNs;
    } else if (commit_requested || now >= next_move) {
      MoveChunksIntoBuffers();
      next_move = now + kMoveChunksPeriodNs;
    }
    if (now >= next_cpu_check) {
      for (std::string& line : cpu_watch.Poll()) notice_(std::move(line));
      next_cpu_check = now + kCpuHotplugPeriodNs;
    }
  }
}

void BufferOwner::DrainLoop(SessionStream* stream) {
  pthread_setname_np(pthread_self(), "rs-drain");
  stream->ClaimState();
  const int64_t write_ns = int64_t{config_.file_write_period_ms()} * 1'000'000;
  int64_t next_write = MonotonicNs() + write_ns;
  while (true) {
    {
      absl::MutexLock lock(&stop_mu_);
      const int64_t wait = next_write - MonotonicNs();
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stop_mu_) { return stop_requested_; };
      if (wait > 0) stop_mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Nanoseconds(wait));
      if (stop_requested_) return;
    }
    // What the readers committed since the owner's last move: the file as
    // fresh as before the drain had a thread of its own.
    MoveChunksIntoBuffers();
    stream->WriteIntoFile();
    next_write = NextDue(next_write, write_ns, MonotonicNs());
  }
}
}  // namespace ringside::agent
