#include "agent/session/session_stream.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "buffer/trace_packet.h"

namespace ringside::agent {
namespace {

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

SessionStream::SessionStream(SessionBuffers* buffers, TraceSink* sink, RotatingSink* rotating,
                             uint64_t max_file_size_bytes, uint32_t machine_id, Hooks hooks)
    : buffers_(buffers),
      sink_(sink),
      rotating_(rotating),
      max_file_size_bytes_(max_file_size_bytes),
      machine_id_(machine_id),
      hooks_(std::move(hooks)) {}

absl::Status SessionStream::Write(const std::string& bytes) {
  if (absl::Status st = sink_->Write(bytes); !st.ok()) return st;
  if (rotating_ == nullptr && max_file_size_bytes_ > 0 &&
      sink_->bytes_written() >= max_file_size_bytes_ && !file_limit_reached_.exchange(true) &&
      hooks_.limit_reached) {
    hooks_.limit_reached();
  }
  return absl::OkStatus();
}

void SessionStream::WriteIntoFile(bool end_of_recording) {
  state_.Check();
  if (needs_file_ && !BeginFile()) return;
  if (!pending_.empty()) {
    if (!StreamOut(std::exchange(pending_, {})) || needs_file_) return;
    if (write_failed_) {
      hooks_.notice(absl::StrCat("writing ", sink_->display_name(),
                                 " again; nothing read from the buffers was lost"));
      write_failed_ = false;
    }
  }
  // About 2 ms per MiB read: a snapshot or a status request waits for one
  // batch, not for a whole period's worth.
  std::string out;
  const bool all_written = buffers_->ReadInBatches(kDrainBatchBytes, &out, [&] {
    return out.empty() || (StreamOut(std::exchange(out, {})) && !needs_file_);
  });
  if (!all_written) return;
  if (rotating_ != nullptr && !end_of_recording && rotating_->FileDue()) {
    EndFile();
    if (BeginFile()) StreamOut(std::exchange(pending_, {}));
  }
}

absl::Status SessionStream::DrainForTrailer() {
  state_.Check();
  if (needs_file_ && !BeginFile()) {
    return absl::UnavailableError(absl::StrCat("no file to stream the end of the recording into (",
                                               sink_->display_name(), ")"));
  }
  if (rotating_ != nullptr) WriteIntoFile(/*end_of_recording=*/true);
  return absl::OkStatus();
}

absl::Status SessionStream::WritePending() {
  return pending_.empty() ? absl::OkStatus() : Write(pending_);
}

bool SessionStream::StreamOut(std::string data) {
  const uint64_t max = rotating_ != nullptr ? max_file_size_bytes_ : 0;
  size_t done = 0;
  // Each file takes at least one packet after its preamble, however small
  // the limit: the stream always moves on.
  bool file_has_data = true;
  while (done < data.size()) {
    size_t n = data.size() - done;
    bool end_file = false;
    if (max > 0 && sink_->bytes_written() + n > max) {
      const uint64_t written = sink_->bytes_written();
      n = WholePacketsWithin(data, done, max > written ? max - written : 0);
      if (n == 0 && !file_has_data) n = FramedPacketSize(data, done);
      end_file = true;
    }
    if (n > 0) {
      if (absl::Status st = Write(data.substr(done, n)); !st.ok()) {
        if (!write_failed_) {
          hooks_.notice(
              absl::StrCat(st.message(),
                           "; the file keeps every packet written before, the buffers keep "
                           "recording, and writing is retried each file_write_period_ms"));
        }
        write_failed_ = true;
        pending_ = data.substr(done);
        return false;
      }
      done += n;
      file_has_data = true;
    }
    if (!end_file) break;
    EndFile();
    data.erase(0, done);
    done = 0;
    if (!BeginFile()) {
      pending_ = std::move(data);  // The next file's preamble goes before it.
      return true;
    }
    // The preamble and the descriptors, whole, before the file's first data.
    std::string header = std::exchange(pending_, {});
    if (absl::Status st = Write(header); !st.ok()) {
      write_failed_ = true;
      pending_ = header + data;
      return false;
    }
    file_has_data = false;
  }
  return true;
}

void SessionStream::EndFile() {
  state_.Check();
  std::string tail;
  AppendServicePacket(ClockSnapshotPacket(), machine_id_, &tail);
  const std::vector<SourceStats> sources = hooks_.source_stats();
  AppendServicePacket(buffers_->StatsPacket(BoottimeNowNs(), sources), machine_id_, &tail);
  service_packets_ += 2;
  if (absl::Status st = Write(tail); !st.ok()) {
    hooks_.notice(
        absl::StrCat(st.message(), "; ", sink_->display_name(), " ends without its trace_stats"));
  }
  needs_file_ = true;
}

bool SessionStream::BeginFile() {
  state_.Check();
  if (absl::Status st = rotating_->NextFile(); !st.ok()) {
    if (!file_failed_) {
      hooks_.notice(absl::StrCat(st.message(),
                                 "; the buffers keep recording, and a new file is tried each "
                                 "file_write_period_ms"));
    }
    file_failed_ = true;
    needs_file_ = true;
    return false;
  }
  if (file_failed_) hooks_.notice(absl::StrCat("streaming again, into ", sink_->display_name()));
  file_failed_ = false;
  needs_file_ = false;
  // Self-contained: its own uuid, system info, clocks and config, and every
  // descriptor before any event.
  std::string header;
  hooks_.preamble(&header);
  buffers_->ReadAllDescriptors(&header);
  pending_.insert(0, header);
  return true;
}

}  // namespace ringside::agent
