#include "agent/session/buffer_reader.h"

#include <cstdint>
#include <tuple>

#include "agent/session/packet_events.h"
#include "agent/session/sequence_ids.h"
#include "buffer/durable_store.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

using trace::TracePacket;

namespace {

uint64_t EventKey(buffer::ProducerID producer, uint32_t cpu, uint32_t field) {
  // CPUs below 2^16, field numbers below 2^32 (FtraceEvent's are below 2^29).
  return uint64_t{producer} << 48 | uint64_t{cpu & 0xffff} << 32 | field;
}

}  // namespace

uint64_t BufferPacketReader::events_of(buffer::ProducerID producer, uint32_t cpu,
                                       uint32_t field) const {
  auto it = events_by_kind_.find(EventKey(producer, cpu, field));
  return it == events_by_kind_.end() ? 0 : it->second;
}

void BufferPacketReader::ReadInto(const std::vector<buffer::TraceBuffer*>& buffers,
                                  std::string* out) {
  WriteInto(buffers, out, nullptr, 0).IgnoreError();  // Without a sink, nothing fails.
}

absl::Status BufferPacketReader::WriteInto(const std::vector<buffer::TraceBuffer*>& buffers,
                                           std::string* out, TraceSink* sink, size_t batch_bytes) {
  bool all_read = false;
  return Read(buffers, out, sink, batch_bytes, 0, &all_read);
}

bool BufferPacketReader::ReadSome(const std::vector<buffer::TraceBuffer*>& buffers,
                                  std::string* out, size_t max_bytes) {
  bool all_read = false;
  Read(buffers, out, nullptr, 0, max_bytes, &all_read).IgnoreError();  // No sink: no error.
  return all_read;
}

absl::Status BufferPacketReader::Read(const std::vector<buffer::TraceBuffer*>& buffers,
                                      std::string* out, TraceSink* sink, size_t batch_bytes,
                                      size_t max_bytes, bool* all_read) {
  *all_read = false;
  const size_t start = out->size();
  // Going on with the pass a batch stopped in: the buffer starts a new one
  // by itself if it was written meanwhile. Restarting instead would walk
  // every chunk header again (about 2 ms for 64 MiB) for each batch.
  const size_t first = resume_at_ < buffers.size() ? resume_at_ : 0;
  const bool resuming = resume_at_ < buffers.size();
  resume_at_ = SIZE_MAX;
  for (size_t i = first; i < buffers.size(); i++) {
    buffer::TraceBuffer* b = buffers[i];
    if (!(resuming && i == first)) b->BeginRead();
    buffer::TracePacket packet;
    buffer::PacketSequenceProperties props;
    uint32_t loss = 0;
    while (b->ReadNextTracePacket(&packet, &props, &loss)) {
      scratch_.clear();
      packet.AppendTo(&scratch_);
      FramePacket(props, loss, out);
      if (sink != nullptr && out->size() >= batch_bytes) {
        if (absl::Status st = sink->Write(*out); !st.ok()) return st;
        out->clear();
      }
      if (max_bytes > 0 && out->size() - start >= max_bytes) {
        resume_at_ = i;
        return absl::OkStatus();
      }
    }
  }
  *all_read = true;
  return absl::OkStatus();
}

void BufferPacketReader::ReadAllDescriptors(buffer::DurableStore* store, std::string* out) {
  // A new file: its interned data starts afresh.
  interned_started_.clear();
  store->ForEach(
      [&](buffer::DurableStore::Kind kind, uint64_t id, std::string_view packet) {
        buffer::PacketSequenceProperties props;
        std::tie(props.producer_id_trusted, props.writer_id) =
            buffer::DurableStore::SequenceOf(kind, id);
        props.durable = true;
        scratch_.assign(packet.data(), packet.size());
        FramePacket(props, 0, out);
      },
      /*changed_only=*/false, /*mark_read=*/true);
}

void BufferPacketReader::FramePacket(const buffer::PacketSequenceProperties& props, uint32_t loss,
                                     std::string* out) {
  const bool durable = props.producer_id_trusted == buffer::TraceBuffer::kDurableProducerId;
  const uint32_t key = uint32_t{props.producer_id_trusted} << 16 | props.writer_id;
  // The first interned entry of a sequence in this output starts its
  // interning state (SEQ_INCREMENTAL_STATE_CLEARED): Perfetto's importer
  // resolves interned ids only after that. Its samples never ask for the
  // state to be valid (SEQ_NEEDS_INCREMENTAL_STATE): a loss flagged on one
  // would make the importer drop them all, while their interned data,
  // durable, is still all there.
  if (props.durable && !durable && interned_started_.insert(key).second) {
    buffer::AppendVarIntField(TracePacket::kSequenceFlagsFieldNumber,
                              TracePacket::SEQ_INCREMENTAL_STATE_CLEARED, &scratch_);
  }
  if (durable) sequence_ids_.try_emplace(key, kDescriptorSequenceId);
  // Ids of data sequences count from kFirstDataSequenceId, the durable
  // one's entry (if any) taking a place in the count.
  auto [it, inserted] = sequence_ids_.try_emplace(
      key, static_cast<uint32_t>(sequence_ids_.size()) + kFirstDataSequenceId);
  if (!durable) {
    buffer::AppendVarIntField(TracePacket::kTrustedUidFieldNumber,
                              static_cast<uint32_t>(props.client_identity_trusted.uid), &scratch_);
  }
  buffer::AppendVarIntField(TracePacket::kTrustedPacketSequenceIdFieldNumber, it->second,
                            &scratch_);
  if (props.client_identity_trusted.pid > 0) {
    buffer::AppendVarIntField(TracePacket::kTrustedPidFieldNumber,
                              static_cast<uint32_t>(props.client_identity_trusted.pid), &scratch_);
  }
  if (loss != 0) {
    buffer::AppendVarIntField(TracePacket::kPreviousPacketDroppedFieldNumber, loss, &scratch_);
  }
  if (machine_id_ != 0) {
    buffer::AppendVarIntField(TracePacket::kMachineIdFieldNumber, machine_id_, &scratch_);
  }
  if (!durable) {
    CountEventsByKind(scratch_, [&](uint32_t cpu, uint32_t field, uint64_t n) {
      events_ += n;
      events_by_kind_[EventKey(props.producer_id_trusted, cpu, field)] += n;
    });
  }
  buffer::AppendFramedPacket(scratch_, out);
  packets_++;
}

}  // namespace ringside::agent
