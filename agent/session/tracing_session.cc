#include "agent/session/tracing_session.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config/defaults.h"
#include "agent/descriptors/process_scan.h"
#include "agent/session/cpu_hotplug_watch.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

// How often the owner thread moves committed chunks into the buffers.
constexpr int64_t kMoveChunksPeriodNs = 100'000'000;
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

std::vector<const buffer::TraceBuffer*> Const(const std::vector<buffer::TraceBuffer*>& buffers) {
  return std::vector<const buffer::TraceBuffer*>(buffers.begin(), buffers.end());
}

}  // namespace

absl::StatusOr<std::unique_ptr<TracingSession>> TracingSession::Create(
    config::TraceConfig config, IncidentListener* incidents) {
  ApplyDefaults(&config);
  std::unique_ptr<TracingSession> s(new TracingSession(std::move(config)));
  const config::TraceConfig& cfg = s->config_;
  s->machine_ = ReadMachineIdentity(cfg.machine_name());
  {
    absl::MutexLock lock(&s->mu_);
    s->reader_.set_machine_id(s->machine_.id);
  }
  {
    absl::MutexLock lock(&s->mu_);
    for (const auto& b : cfg.buffers()) {
      auto policy = b.fill_policy() == config::TraceConfig::BufferConfig::DISCARD
                        ? buffer::TraceBuffer::OverwritePolicy::kDiscard
                        : buffer::TraceBuffer::OverwritePolicy::kOverwrite;
      auto tb = buffer::TraceBuffer::Create(size_t{b.size_kb()} * 1024, policy);
      if (tb == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate a buffer of ", b.size_kb(), " KiB"));
      }
      s->buffers_.push_back(std::move(tb));
    }
    if (cfg.durable_buffer_size_kb() > 0 && !s->buffers_.empty()) {
      // Beside the first buffer, which is read first: descriptors come
      // before any event of any buffer.
      s->buffers_[0]->SetDurableStore(std::make_unique<buffer::DurableStore>(
          size_t{cfg.durable_buffer_size_kb()} * 1024, s->buffers_[0]->size()));
      s->tracker_ = std::make_unique<DescriptorTracker>();
    }
  }
  if (!s->buffers_.empty() && !cfg.builtin_data_sources().disable_clock_snapshotting()) {
    ProducerBuffer::Options clock_options;
    clock_options.num_chunks = 4;
    clock_options.policy = PoolExhaustedPolicy::kDrop;
    s->clock_producer_ = std::make_unique<ProducerBuffer>(
        kClockProducerId, buffer::ClientIdentity{getuid(), getpid()}, clock_options);
    s->clock_writer_ = s->clock_producer_->CreateTraceWriter(1);
  }
  s->sources_ = BuildDataSources(cfg, s->tracker_.get(), incidents);
  s->warnings_ = s->sources_.warnings;
  return s;
}

uint64_t TracingSession::MaxTraceBytes(const config::TraceConfig& config) {
  uint64_t bytes = 0;
  for (const auto& b : config.buffers()) bytes += uint64_t{b.size_kb()} * 1024;
  return bytes + bytes / 4 + uint64_t{config.durable_buffer_size_kb()} * 2048 + (8 << 20);
}

TracingSession::~TracingSession() { StopOwner(); }

void TracingSession::StartOwner() {
  owner_ = std::thread([this] { BufferOwnerLoop(); });
  if (streaming() && config_.file_write_period_ms() > 0) {
    drain_ = std::thread([this] { DrainLoop(); });
  }
  // Readers whose pool runs low ask the owner to commit, and wait for it.
  for (SourceSlot& slot : sources_.slots) {
    slot.producer->AttachCommitter([this] {
      absl::MutexLock lock(&stop_mu_);
      commit_requested_ = true;
    });
  }
}

void TracingSession::StopOwner() {
  // From here on a reader that finds its pool empty drops rather than waits
  // for a commit that would not come (the sources' final drain in their
  // destructors, when Stop() was not called).
  for (SourceSlot& slot : sources_.slots) slot.producer->DetachCommitter();
  {
    absl::MutexLock lock(&stop_mu_);
    stop_requested_ = true;
  }
  if (owner_.joinable()) owner_.join();
  if (drain_.joinable()) drain_.join();
  stream_state_.Claim();
}

std::vector<buffer::TraceBuffer*> TracingSession::BuffersLocked() {
  std::vector<buffer::TraceBuffer*> out;
  for (auto& b : buffers_) out.push_back(b.get());
  return out;
}

absl::Status TracingSession::StartIntoFiles(RotatingSink* files) {
  rotating_ = files;
  return Start(static_cast<TraceSink*>(files));
}

absl::Status TracingSession::Start(TraceSink* stream) {
  if (state_.load() != State::kConfigured) {
    return absl::FailedPreconditionError("the tracing session was already started");
  }
  if (streaming() && stream == nullptr) {
    return absl::InvalidArgumentError("write_into_file needs a file to stream into");
  }
  stream_ = streaming() ? stream : nullptr;
  start_boottime_ns_ = BoottimeNowNs();
  start_clocks_ = ClockSnapshotPacket();
  bool recording_kernel_events = false;
  for (SourceSlot& slot : sources_.slots) {
    if (absl::Status st = slot.source->Start(); !st.ok()) {
      warnings_.push_back(absl::StrCat(slot.name, " did not start: ", st.message()));
      sources_.failed.push_back({slot.name, std::string(st.message())});
      slot.source.reset();
      continue;
    }
    recording_kernel_events = true;
  }
  if (!recording_kernel_events) {
    warnings_.push_back(
        "no kernel data source is running: recording processes and threads from /proc only");
  }
  // Scanned once the sources run, so that no process can start unseen
  // between the scan and the first event; one that starts meanwhile is
  // named by both, the scan's (newer) entry winning.
  start_processes_ = ScanProcesses();
  if (tracker_ != nullptr) tracker_->Seed(start_processes_);
  state_.store(State::kStarted);
  if (streaming()) {
    std::string header;
    AppendPreamble(&header);
    MoveChunksIntoBuffers();  // The /proc scan's descriptors, read first, from the start.
    {
      absl::MutexLock lock(&mu_);
      reader_.ReadInto(BuffersLocked(), &header);
    }
    if (absl::Status st = WriteToStream(header); !st.ok()) return st;
  }
  StartOwner();
  return absl::OkStatus();
}

void TracingSession::WriteClockSnapshot() {
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

void TracingSession::MoveChunksIntoBuffers() {
  absl::MutexLock lock(&mu_);
  for (SourceSlot& slot : sources_.slots) {
    slot.producer->CommitQueuedInto(buffers_[slot.target_buffer].get());
  }
  if (clock_producer_ != nullptr) clock_producer_->CommitQueuedInto(buffers_[0].get());
  if (tracker_ != nullptr) tracker_->ApplyTo(buffers_[0]->durable());
}

void TracingSession::Flush() {
  for (SourceSlot& slot : sources_.slots) slot.producer->ScrapeWriters();
  MoveChunksIntoBuffers();
  // Everything written before now is in the buffers: the durable store may
  // pin the ends it was told of to this position.
  if (tracker_ != nullptr) {
    absl::MutexLock lock(&mu_);
    buffers_[0]->durable()->Drained(buffers_[0]->stats().bytes_written);
  }
}

void TracingSession::BufferOwnerLoop() {
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
      for (std::string& line : cpu_watch.Poll()) Notice(std::move(line));
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
      for (std::string& line : cpu_watch.Poll()) Notice(std::move(line));
      next_cpu_check = now + kCpuHotplugPeriodNs;
    }
  }
}

void TracingSession::DrainLoop() {
  stream_state_.Claim();
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
    WriteIntoFile();
    next_write = NextDue(next_write, write_ns, MonotonicNs());
  }
}

absl::Status TracingSession::ReadBuffers(TraceSink* sink) {
  if (state_.load() == State::kConfigured) {
    return absl::FailedPreconditionError("the tracing session has not started");
  }
  std::string out;
  {
    absl::MutexLock lock(&mu_);
    reader_.ReadInto(BuffersLocked(), &out);
  }
  return out.empty() ? absl::OkStatus() : sink->Write(out);
}

void TracingSession::Notice(std::string message) {
  absl::MutexLock lock(&notices_mu_);
  notices_.push_back(std::move(message));
}

std::vector<std::string> TracingSession::TakeNotices() {
  absl::MutexLock lock(&notices_mu_);
  return std::exchange(notices_, {});
}

std::vector<SourceStats> TracingSession::CollectSourceStats() const {
  if (state_.load() == State::kStopped) return final_source_stats_;
  std::vector<SourceStats> out;
  for (const SourceSlot& slot : sources_.slots) {
    SourceStats s{slot.name, slot.producer->stats(), {}, slot.producer->producer_id(), {}, {}};
    if (slot.source != nullptr) {
      s.losses = slot.source->Losses();
      s.written = slot.source->EventTallies();
      s.consumer = slot.source->consumer_cpu();
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<TracingSession::SourceReport> TracingSession::CollectSourceReports() const {
  if (state_.load() == State::kStopped) return final_source_reports_;
  std::vector<SourceReport> out;
  for (const SourceSlot& slot : sources_.slots) {
    if (slot.source == nullptr) continue;  // In sources_.failed.
    const ProducerBuffer::Options& pool = slot.producer->options();
    out.push_back({slot.name, SourceReport::State::kRunning, "", slot.source->events_read(),
                   slot.source->Losses(), slot.source->consumer_cpu(),
                   slot.source->staging_memory(), uint64_t{pool.num_chunks} * pool.chunk_size});
  }
  for (const BuiltSources::Failed& f : sources_.failed) {
    out.push_back({f.name, SourceReport::State::kFailed, f.error, 0, {}, {}, {}, 0});
  }
  return out;
}

TracingSession::Report TracingSession::report() const {
  Report r;
  r.sources = CollectSourceReports();
  absl::MutexLock lock(&mu_);
  for (const auto& b : buffers_) r.buffers.push_back({b->stats(), b->used_size()});
  if (!buffers_.empty() && buffers_[0]->durable() != nullptr) {
    r.durable = buffers_[0]->durable()->stats();
  }
  return r;
}

TracingSession::Progress TracingSession::progress() const {
  Progress p;
  p.elapsed_s = static_cast<double>(BoottimeNowNs() - start_boottime_ns_) / 1e9;
  if (state_.load() == State::kStopped) {
    p.events = final_events_seen_;
    p.events_lost = final_events_lost_;
  } else {
    for (const SourceSlot& slot : sources_.slots) {
      if (slot.source == nullptr) continue;
      p.events += slot.source->events_read();
      p.events_lost += slot.source->events_lost();
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& b : buffers_) {
    const auto& st = b->stats();
    p.bytes_written += st.bytes_written;
    p.buffer_size += b->size();
    p.bytes_lost += st.bytes_overwritten;
  }
  return p;
}

absl::Status TracingSession::Stop() {
  const State was = state_.load();
  if (was == State::kStopping || was == State::kStopped) return absl::OkStatus();
  state_.store(State::kStopping);
  // All sources end at one moment, then each is detached and read out.
  for (SourceSlot& slot : sources_.slots) {
    if (slot.source != nullptr) slot.source->StopRecording();
  }
  for (SourceSlot& slot : sources_.slots) {
    if (slot.source != nullptr) slot.source->Stop();
  }
  StopOwner();
  Flush();
  // Losses before the buffers, taken before the sources go away.
  final_source_stats_ = CollectSourceStats();
  final_source_reports_ = CollectSourceReports();
  for (SourceReport& r : final_source_reports_) {
    if (r.state == SourceReport::State::kRunning) r.state = SourceReport::State::kStopped;
  }
  for (const SourceSlot& slot : sources_.slots) {
    if (slot.source == nullptr) continue;
    final_events_seen_ += slot.source->events_read();
    final_events_lost_ += slot.source->events_lost();
  }
  // Detached and their instances removed: leave tracefs as we found it.
  for (SourceSlot& slot : sources_.slots) slot.source.reset();
  sources_.UnmountTracefs();
  state_.store(State::kStopped);
  return absl::OkStatus();
}

void TracingSession::AppendPreamble(std::string* out, bool fresh_scan) {
  auto emit = [&](TracePacket p) {
    AppendServicePacket(std::move(p), machine_.id, out);
    service_packets_++;
  };
  emit(TraceUuidPacket());
  emit(SystemInfoPacket(machine_));
  emit(start_clocks_);
  emit(TraceConfigPacket(config_));
  // With the durable store, its descriptors (seeded from this scan) follow.
  if (tracker_ == nullptr) emit(fresh_scan ? ScanProcesses() : start_processes_);
  emit(TracingStartedPacket(start_boottime_ns_));
}

absl::StatusOr<TracingSession::Summary> TracingSession::WriteTrace(TraceSink* sink) {
  if (state_.load() != State::kStopped) {
    return absl::FailedPreconditionError("the trace is written once the session has stopped");
  }
  stream_state_.Check();
  const bool into_stream = streaming() && sink == stream_;
  if (into_stream && stream_needs_file_ && !BeginStreamFile()) {
    return absl::UnavailableError(absl::StrCat("no file to stream the end of the recording into (",
                                               stream_->display_name(), ")"));
  }
  // Files cut by size: the rest of the buffers goes the way a periodic
  // write goes, into as many files as it needs, before the trailer.
  if (into_stream && rotating_ != nullptr) WriteIntoFile(/*end_of_recording=*/true);
  const int64_t end_ns = BoottimeNowNs();
  std::string out;
  if (!into_stream) AppendPreamble(&out);
  // The file goes out as it is read, never whole in memory: a buffer of
  // 64 MiB was a string of as much, grown by doubling, before one write.
  // The first error ends the writing.
  absl::Status written = absl::OkStatus();
  if (into_stream && !stream_pending_.empty()) written = WriteToStream(stream_pending_);
  auto write_out = [&] {
    if (written.ok() && !out.empty()) written = into_stream ? WriteToStream(out) : sink->Write(out);
    out.clear();
  };
  auto emit = [&](TracePacket p) {
    AppendServicePacket(std::move(p), machine_.id, &out);
    service_packets_++;
  };
  Summary summary;
  // Buffer 0's read passes begin with the durable descriptors: all of them
  // into a whole file; into a stream, those that changed since the last
  // write. In batches, the lock let go between them (a status request
  // waits for one batch), then whatever is left in one read: the session
  // has stopped, so nothing is written into the buffers meanwhile.
  uint64_t total = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) total += b->size();
  }
  for (uint64_t batches = total / SessionSnapshot::kWriteBatchBytes + 2;
       batches > 0 && written.ok(); batches--) {
    bool all_read = false;
    {
      absl::MutexLock lock(&mu_);
      all_read = reader_.ReadSome(BuffersLocked(), &out, SessionSnapshot::kWriteBatchBytes);
    }
    write_out();
    if (all_read) break;
  }
  {
    absl::MutexLock lock(&mu_);
    reader_.ReadInto(BuffersLocked(), &out);
  }
  emit(ScanProcesses());
  emit(ClockSnapshotPacket());
  {
    absl::MutexLock lock(&mu_);
    const std::vector<buffer::TraceBuffer*> buffers = BuffersLocked();
    // Everything is read now, but for files cut by rotation, which each
    // hold a part of the recording.
    const bool whole_recording = !(into_stream && rotating_ != nullptr);
    const std::vector<EventLoss> event_losses = EventLosses(final_source_stats_, reader_);
    emit(TraceStatsPacket(end_ns, final_source_stats_, Const(buffers),
                          tracker_ != nullptr ? buffers_[0]->durable() : nullptr,
                          whole_recording ? &event_losses : nullptr));
    for (const EventLoss& l : event_losses) {
      (l.stage == "chunk_pool" ? summary.events_lost_in_pool : summary.events_lost_in_buffers) +=
          l.events;
    }
    for (const buffer::TraceBuffer* b : buffers) {
      summary.chunks_overwritten += b->stats().chunks_overwritten;
      summary.chunks_discarded += b->stats().chunks_discarded;
      summary.bytes_overwritten += b->stats().bytes_overwritten;
    }
    summary.packets = reader_.packets();
    summary.events_kept = reader_.events();
  }
  emit(TracingDisabledPacket(end_ns));

  write_out();
  if (written.ok()) written = sink->Finish();
  if (!written.ok() && into_stream) {
    return absl::Status(
        written.code(),
        absl::StrCat(written.message(), "; it holds a valid trace of the first ",
                     sink->bytes_written(), " bytes, without the end of the recording"));
  }
  if (!written.ok()) return written;
  for (const SourceStats& s : final_source_stats_)
    summary.chunks_dropped += s.producer.chunks_dropped();
  summary.events_seen = final_events_seen_;
  summary.events_lost = final_events_lost_;
  summary.packets += service_packets_;
  summary.file_bytes = sink->bytes_written();
  return summary;
}

}  // namespace ringside::agent
