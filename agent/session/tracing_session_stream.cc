// TracingSession's streaming (write_into_file): the periodic write of the
// buffers into the stream, and, for a stream cut into files (RotatingSink),
// where one file ends and the next begins.

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/session/tracing_session.h"
#include "buffer/trace_packet.h"

namespace ringside::agent {
namespace {

// How much a streaming drain reads per hold of the buffers' lock.
constexpr size_t kDrainBatchBytes = 1 << 20;

// The size of the framed packet at data[at] (a whole one: the session
// framed it), or 0 past the end.
size_t FramedPacketSize(const std::string& data, size_t at) {
  if (at >= data.size()) return 0;
  const auto* begin = reinterpret_cast<const uint8_t*>(data.data());
  const buffer::PacketFrame frame = buffer::ReadPacketFrame(begin + at, begin + data.size());
  return frame.status == buffer::PacketFrame::Status::kWhole ? static_cast<size_t>(frame.size())
                                                             : 0;
}

// Bytes of the whole framed packets from data[from] on that fit in `room`.
size_t WholePacketsWithin(const std::string& data, size_t from, uint64_t room) {
  size_t end = from;
  for (size_t n; (n = FramedPacketSize(data, end)) != 0 && end + n - from <= room;) end += n;
  return end - from;
}

}  // namespace

absl::Status TracingSession::WriteToStream(const std::string& bytes) {
  if (absl::Status st = stream_->Write(bytes); !st.ok()) return st;
  if (rotating_ == nullptr && config_.max_file_size_bytes() > 0 &&
      stream_->bytes_written() >= config_.max_file_size_bytes()) {
    file_limit_reached_.store(true);
  }
  return absl::OkStatus();
}

void TracingSession::WriteIntoFile(bool end_of_recording) {
  stream_state_.Check();
  if (stream_needs_file_ && !BeginStreamFile()) return;
  if (!stream_pending_.empty()) {
    if (!StreamOut(std::exchange(stream_pending_, {})) || stream_needs_file_) return;
    if (stream_write_failed_) {
      Notice(absl::StrCat("writing ", stream_->display_name(),
                          " again; nothing read from the buffers was lost"));
      stream_write_failed_ = false;
    }
  }
  // In batches, the lock let go between them: a snapshot or a status
  // request waits for one batch, not for a whole period's worth (about
  // 2 ms per MiB read). Bounded, so that a drain always ends.
  uint64_t total = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) total += b->size();
  }
  for (uint64_t batches = total / kDrainBatchBytes + 2; batches > 0; batches--) {
    std::string out;
    bool all_read = false;
    {
      absl::MutexLock lock(&mu_);
      all_read = reader_.ReadSome(BuffersLocked(), &out, kDrainBatchBytes);
    }
    if (!out.empty() && (!StreamOut(std::move(out)) || stream_needs_file_)) return;
    if (all_read) break;
  }
  if (rotating_ != nullptr && !end_of_recording && rotating_->FileDue()) {
    EndStreamFile();
    if (BeginStreamFile()) StreamOut(std::exchange(stream_pending_, {}));
  }
}

bool TracingSession::StreamOut(std::string data) {
  const uint64_t max = rotating_ != nullptr ? config_.max_file_size_bytes() : 0;
  size_t done = 0;
  // Each file takes at least one packet after its preamble, however small
  // the limit: the stream always moves on.
  bool file_has_data = true;
  while (done < data.size()) {
    size_t n = data.size() - done;
    bool end_file = false;
    if (max > 0 && stream_->bytes_written() + n > max) {
      const uint64_t written = stream_->bytes_written();
      n = WholePacketsWithin(data, done, max > written ? max - written : 0);
      if (n == 0 && !file_has_data) n = FramedPacketSize(data, done);
      end_file = true;
    }
    if (n > 0) {
      if (absl::Status st = WriteToStream(data.substr(done, n)); !st.ok()) {
        if (!stream_write_failed_) {
          Notice(absl::StrCat(st.message(),
                              "; the file keeps every packet written before, the buffers keep "
                              "recording, and writing is retried each file_write_period_ms"));
        }
        stream_write_failed_ = true;
        stream_pending_ = data.substr(done);
        return false;
      }
      done += n;
      file_has_data = true;
    }
    if (!end_file) break;
    EndStreamFile();
    data.erase(0, done);
    done = 0;
    if (!BeginStreamFile()) {
      stream_pending_ = std::move(data);  // The next file's preamble goes before it.
      return true;
    }
    // The preamble and the descriptors, whole, before the file's first data.
    std::string header = std::exchange(stream_pending_, {});
    if (absl::Status st = WriteToStream(header); !st.ok()) {
      stream_write_failed_ = true;
      stream_pending_ = header + data;
      return false;
    }
    file_has_data = false;
  }
  return true;
}

void TracingSession::EndStreamFile() {
  stream_state_.Check();
  std::string tail;
  AppendServicePacket(ClockSnapshotPacket(), machine_.id, &tail);
  const std::vector<SourceStats> sources = CollectSourceStats();
  {
    absl::MutexLock lock(&mu_);
    const std::vector<buffer::TraceBuffer*> buffers = BuffersLocked();
    AppendServicePacket(
        TraceStatsPacket(BoottimeNowNs(), sources,
                         std::vector<const buffer::TraceBuffer*>(buffers.begin(), buffers.end()),
                         tracker_ != nullptr ? buffers_[0]->durable() : nullptr),
        machine_.id, &tail);
  }
  service_packets_ += 2;
  if (absl::Status st = WriteToStream(tail); !st.ok()) {
    Notice(
        absl::StrCat(st.message(), "; ", stream_->display_name(), " ends without its trace_stats"));
  }
  stream_needs_file_ = true;
}

bool TracingSession::BeginStreamFile() {
  stream_state_.Check();
  if (absl::Status st = rotating_->NextFile(); !st.ok()) {
    if (!stream_file_failed_) {
      Notice(absl::StrCat(st.message(),
                          "; the buffers keep recording, and a new file is tried each "
                          "file_write_period_ms"));
    }
    stream_file_failed_ = true;
    stream_needs_file_ = true;
    return false;
  }
  if (stream_file_failed_) Notice(absl::StrCat("streaming again, into ", stream_->display_name()));
  stream_file_failed_ = false;
  stream_needs_file_ = false;
  // Self-contained: its own uuid, system info, clocks and config, and every
  // descriptor before any event.
  std::string header;
  AppendPreamble(&header, /*fresh_scan=*/true);
  {
    absl::MutexLock lock(&mu_);
    if (tracker_ != nullptr) reader_.ReadAllDescriptors(buffers_[0]->durable(), &header);
  }
  stream_pending_.insert(0, header);
  return true;
}

}  // namespace ringside::agent
