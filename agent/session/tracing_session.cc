#include "agent/session/tracing_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/config/defaults.h"
#include "agent/descriptors/process_scan.h"
#include "agent/writer/producer_buffer.h"

namespace ringside::agent {

using trace::TracePacket;

absl::StatusOr<std::unique_ptr<TracingSession>> TracingSession::Create(
    config::TraceConfig config, IncidentListener* incidents) {
  ApplyDefaults(&config);
  std::unique_ptr<TracingSession> s(new TracingSession(std::move(config)));
  const config::TraceConfig& cfg = s->config_;
  s->machine_ = ReadMachineIdentity(cfg.machine_name());
  absl::StatusOr<std::unique_ptr<SessionBuffers>> buffers =
      SessionBuffers::Create(cfg, s->machine_.id);
  if (!buffers.ok()) return buffers.status();
  s->buffers_ = *std::move(buffers);
  if (s->buffers_->has_durable_store()) s->tracker_ = std::make_unique<DescriptorTracker>();
  s->owner_ = std::make_unique<BufferOwner>(
      s->config_, s->buffers_.get(), &s->sources_, s->tracker_.get(),
      [session = s.get()](std::string message) { session->Notice(std::move(message)); });
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

void TracingSession::StopOwner() {
  if (owner_ != nullptr) owner_->Stop();  // Null: Create() failed before it.
  if (stream_ != nullptr) stream_->ClaimState();
}

absl::Status TracingSession::StartIntoFiles(RotatingSink* files) { return StartWith(files, files); }

absl::Status TracingSession::Start(TraceSink* stream) { return StartWith(stream, nullptr); }

absl::Status TracingSession::StartWith(TraceSink* stream, RotatingSink* rotating) {
  if (state_.load() != State::kConfigured) {
    return absl::FailedPreconditionError("the tracing session was already started");
  }
  if (streaming() && stream == nullptr) {
    return absl::InvalidArgumentError("write_into_file needs a file to stream into");
  }
  if (streaming()) {
    SessionStream::Hooks hooks;
    hooks.preamble = [this](std::string* out) { AppendPreamble(out, /*fresh_scan=*/true); };
    hooks.source_stats = [this] { return CollectSourceStats(); };
    hooks.notice = [this](std::string message) { Notice(std::move(message)); };
    hooks.limit_reached = [this] {
      if (attention_) attention_();
    };
    stream_ = std::make_unique<SessionStream>(buffers_.get(), stream, rotating,
                                              config_.max_file_size_bytes(), machine_.id,
                                              std::move(hooks));
  }
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
    recording_kernel_events |= slot.source->records_kernel_events();
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
    owner_->MoveChunksIntoBuffers();  // The /proc scan's descriptors, read first, from the start.
    buffers_->ReadInto(&header);
    if (absl::Status st = stream_->Write(header); !st.ok()) return st;
  }
  owner_->Start(stream_ != nullptr && config_.file_write_period_ms() > 0 ? stream_.get() : nullptr);
  return absl::OkStatus();
}

void TracingSession::Flush() { owner_->Flush(); }

absl::StatusOr<std::unique_ptr<SessionSnapshot>> TracingSession::CloneSnapshot(
    const SnapshotTrigger& trigger) {
  const State state = state_.load();
  if (state != State::kStarted && state != State::kStopped) {
    return absl::FailedPreconditionError("a snapshot needs a started or stopped session");
  }
  std::unique_ptr<SessionSnapshot> snap(new SessionSnapshot());
  if (state == State::kStarted) {
    // The freshest data: what the kernel staged but no reader has read yet
    // (a drain period's worth), then what writers hold in open chunks.
    const absl::Time deadline = absl::Now() + kStagingFlushLimit;
    for (SourceSlot& slot : sources_.slots) {
      if (slot.source == nullptr) continue;
      if (!slot.source->FlushStaging(std::max(deadline - absl::Now(), absl::ZeroDuration()))) {
        snap->sources_not_flushed_++;
      }
    }
    Flush();
  }
  snap->trigger_ = trigger;
  snap->config_ = config_;
  snap->machine_ = machine_;
  snap->durable_ = tracker_ != nullptr;
  snap->started_at_ns_ = start_boottime_ns_;
  snap->cloned_at_ns_ = BoottimeNowNs();
  snap->start_clocks_ = start_clocks_;
  snap->clocks_ = ClockSnapshotPacket();
  const std::vector<SourceStats> sources = CollectSourceStats();
  if (absl::Status st = buffers_->Clone(kCloneStepBytes, &snap->buffers_); !st.ok()) return st;
  std::vector<const buffer::TraceBuffer*> clones;
  for (const auto& b : snap->buffers_) clones.push_back(b.get());
  snap->stats_ = TraceStatsPacket(snap->cloned_at_ns_, sources, clones,
                                  snap->durable_ ? snap->buffers_[0]->durable() : nullptr);
  return snap;
}

absl::Status TracingSession::ReadBuffers(TraceSink* sink) {
  if (state_.load() == State::kConfigured) {
    return absl::FailedPreconditionError("the tracing session has not started");
  }
  std::string out;
  buffers_->ReadInto(&out);
  return out.empty() ? absl::OkStatus() : sink->Write(out);
}

void TracingSession::Notice(std::string message) {
  {
    absl::MutexLock lock(&notices_mu_);
    notices_.push_back(std::move(message));
  }
  if (attention_) attention_();
}

std::vector<std::string> TracingSession::TakeNotices() {
  absl::MutexLock lock(&notices_mu_);
  return std::exchange(notices_, {});
}

std::vector<SourceStats> TracingSession::CollectSourceStats() const {
  if (state_.load() == State::kStopped) return final_source_stats_;
  std::vector<SourceStats> out;
  for (const SourceSlot& slot : sources_.slots) {
    SourceStats s{slot.name, slot.producer->stats(), {}, slot.producer->producer_id(), {}, {}, {},
                  {}};
    if (slot.source != nullptr) {
      s.losses = slot.source->Losses();
      s.written = slot.source->EventTallies();
      s.seen = slot.source->EventsSeen();
      s.consumer = slot.source->consumer_cpu();
      s.stacks = slot.source->stacks();
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
                   slot.source->staging_memory(), uint64_t{pool.num_chunks} * pool.chunk_size,
                   slot.source->stacks()});
  }
  for (const BuiltSources::Failed& f : sources_.failed) {
    out.push_back({f.name, SourceReport::State::kFailed, f.error, 0, {}, {}, {}, 0, {}});
  }
  return out;
}

TracingSession::Report TracingSession::report() const {
  Report r;
  r.sources = CollectSourceReports();
  for (const SessionBuffers::Usage& u : buffers_->usage()) {
    r.buffers.push_back({u.stats, u.used_bytes});
  }
  r.durable = buffers_->durable_stats();
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
  for (const SessionBuffers::Usage& u : buffers_->usage()) {
    p.bytes_written += u.stats.bytes_written;
    p.buffer_size += u.size;
    p.bytes_lost += u.stats.bytes_overwritten;
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

void TracingSession::AppendOwnPacket(TracePacket packet, std::string* out) {
  AppendServicePacket(std::move(packet), machine_.id, out);
  service_packets_++;
}

void TracingSession::AppendProcessScan(TracePacket scan, std::string* out) {
  std::vector<TracePacket> labels = PodLabelsPackets(scan);
  AppendOwnPacket(std::move(scan), out);
  for (TracePacket& packet : labels) AppendOwnPacket(std::move(packet), out);
}

void TracingSession::AppendPreamble(std::string* out, bool fresh_scan) {
  AppendOwnPacket(TraceUuidPacket(), out);
  AppendOwnPacket(SystemInfoPacket(machine_), out);
  AppendOwnPacket(start_clocks_, out);
  AppendOwnPacket(TraceConfigPacket(config_), out);
  // With the durable store, its descriptors (seeded from this scan) follow.
  if (tracker_ == nullptr) AppendProcessScan(fresh_scan ? ScanProcesses() : start_processes_, out);
  AppendOwnPacket(TracingStartedPacket(start_boottime_ns_), out);
}

void TracingSession::AppendTrailer(int64_t end_ns, bool whole_recording, std::string* out,
                                   Summary* summary) {
  AppendProcessScan(ScanProcesses(), out);
  AppendOwnPacket(ClockSnapshotPacket(), out);
  SessionBuffers::Totals totals;
  AppendOwnPacket(buffers_->FinalStatsPacket(end_ns, final_source_stats_, whole_recording, &totals),
                  out);
  summary->packets = totals.packets;
  summary->events_kept = totals.events_kept;
  summary->chunks_overwritten = totals.chunks_overwritten;
  summary->bytes_overwritten = totals.bytes_overwritten;
  summary->chunks_discarded = totals.chunks_discarded;
  summary->events_lost_in_pool = totals.events_lost_in_pool;
  summary->events_lost_in_buffers = totals.events_lost_in_buffers;
  AppendOwnPacket(TracingDisabledPacket(end_ns), out);
}

absl::StatusOr<TracingSession::Summary> TracingSession::WriteTrace(TraceSink* sink) {
  if (state_.load() != State::kStopped) {
    return absl::FailedPreconditionError("the trace is written once the session has stopped");
  }
  if (stream_ != nullptr) stream_->CheckState();
  const bool into_stream = stream_ != nullptr && sink == stream_->sink();
  if (into_stream) {
    if (absl::Status st = stream_->DrainForTrailer(); !st.ok()) return st;
  }
  const int64_t end_ns = BoottimeNowNs();
  std::string out;
  if (!into_stream) AppendPreamble(&out);
  // The file goes out as it is read, never whole in memory: a buffer of
  // 64 MiB was a string of as much, grown by doubling, before one write.
  // The first error ends the writing.
  absl::Status written = into_stream ? stream_->WritePending() : absl::OkStatus();
  auto write_out = [&] {
    if (written.ok() && !out.empty())
      written = into_stream ? stream_->Write(out) : sink->Write(out);
    out.clear();
    return written.ok();
  };
  // Buffer 0's read passes begin with the durable descriptors: all of them
  // into a whole file; into a stream, those that changed since the last
  // write. In batches (a status request waits for one batch), then
  // whatever is left in one read: the session has stopped, so nothing is
  // written into the buffers meanwhile.
  if (written.ok()) buffers_->ReadInBatches(SessionSnapshot::kWriteBatchBytes, &out, write_out);
  buffers_->ReadInto(&out);
  Summary summary;
  // Everything is read now, but for files cut by rotation, which each hold
  // a part of the recording.
  AppendTrailer(end_ns, /*whole_recording=*/!(into_stream && stream_->rotating()), &out, &summary);
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
  summary.packets += service_packets_ + (stream_ != nullptr ? stream_->service_packets() : 0);
  summary.file_bytes = sink->bytes_written();
  return summary;
}

}  // namespace ringside::agent
