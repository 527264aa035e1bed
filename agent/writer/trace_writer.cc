#include "agent/writer/trace_writer.h"

#include <cstdlib>
#include <cstring>

#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using buffer::kFragmentHeaderSize;
using buffer::kMaxTagSize;
using buffer::kMaxVarIntSize;
using buffer::WireType;
using buffer::WriteTag;
using buffer::WriteVarInt;

}  // namespace

// --- ProtoMessage ------------------------------------------------------------

void ProtoMessage::AppendVarIntSlow(uint32_t field, uint64_t value) {
  uint8_t buf[kMaxTagSize + kMaxVarIntSize];
  uint8_t* end = WriteVarInt(value, WriteTag(field, WireType::kVarInt, buf));
  writer_->WriteBytes(buf, static_cast<size_t>(end - buf));
}

void ProtoMessage::AppendRawVarIntSlow(uint64_t value) {
  uint8_t buf[kMaxVarIntSize];
  uint8_t* end = WriteVarInt(value, buf);
  writer_->WriteBytes(buf, static_cast<size_t>(end - buf));
}

void ProtoMessage::AppendFixed32(uint32_t field, uint32_t value) {
  Prepare();
  uint8_t buf[kMaxTagSize + 4];
  uint8_t* p = buffer::WriteFixed32(value, WriteTag(field, WireType::kFixed32, buf));
  writer_->WriteBytes(buf, static_cast<size_t>(p - buf));
}

void ProtoMessage::AppendFixed64(uint32_t field, uint64_t value) {
  Prepare();
  uint8_t buf[kMaxTagSize + 8];
  uint8_t* p = buffer::WriteFixed64(value, WriteTag(field, WireType::kFixed64, buf));
  writer_->WriteBytes(buf, static_cast<size_t>(p - buf));
}

void ProtoMessage::AppendBytesSlow(uint32_t field, const void* data, size_t size) {
  uint8_t buf[kMaxTagSize + kMaxVarIntSize];
  uint8_t* end = WriteVarInt(size, WriteTag(field, WireType::kLengthDelimited, buf));
  writer_->WriteBytes(buf, static_cast<size_t>(end - buf));
  writer_->WriteBytes(static_cast<const uint8_t*>(data), size);
}

ProtoMessage* ProtoMessage::BeginNestedSlow(uint32_t field) {
  const int depth = depth_ + 1;
  if (depth >= TraceWriter::kMaxNestingDepth) {
    // A programming error, not input: the trace format nests a few levels.
    std::abort();
  }
  uint8_t buf[kMaxTagSize];
  uint8_t* end = WriteTag(field, WireType::kLengthDelimited, buf);
  writer_->WriteBytes(buf, static_cast<size_t>(end - buf));
  ProtoMessage& m = writer_->nests_[depth];
  m.writer_ = writer_;
  m.depth_ = depth;
  m.patch_ = nullptr;
  m.size_field_ = writer_->ReserveSizeField();
  m.begin_total_ = writer_->logical_total();
  writer_->depth_ = depth;
  return &m;
}

void ProtoMessage::EndNested() {
  if (depth_ > 0 && writer_->depth_ >= depth_) writer_->EndNestedAbove(depth_ - 1);
}

// --- TraceWriter -------------------------------------------------------------

TraceWriter::TraceWriter(ChunkPool* producer, buffer::WriterID writer_id)
    : producer_(producer),
      chunk_size_(producer->chunk_size()),
      writer_id_(writer_id),
      scratch_(new uint8_t[chunk_size_]) {
  for (ProtoMessage& m : nests_) m.writer_ = this;
}

TraceWriter::~TraceWriter() {
  Flush();
  producer_->Unregister(this);
}

void TraceWriter::WriteBytes(const uint8_t* data, size_t size) {
  while (size > 0) {
    if (cur_ == end_) SwitchChunk(/*packet_open=*/true);
    const size_t n = std::min(size, static_cast<size_t>(end_ - cur_));
    std::memcpy(cur_, data, n);
    cur_ += n;
    data += n;
    size -= n;
  }
}

uint8_t* TraceWriter::ReserveSizeField() {
  // A length must sit whole in one chunk: it may become a 4-byte patch.
  constexpr ptrdiff_t kSize = buffer::kRedundantVarIntSize;
  if (end_ - cur_ < kSize) SwitchChunk(/*packet_open=*/true);
  uint8_t* field = cur_;
  std::memset(field, 0, kSize);
  cur_ += kSize;
  return field;
}

void TraceWriter::BeginFragment() {
  fragment_header_ = cur_;
  cur_ += kFragmentHeaderSize;
  fragments_++;
}

void TraceWriter::EnterDropMode() {
  dropping_ = true;
  cur_ = scratch_.get();
  end_ = cur_ + chunk_size_;
}

void TraceWriter::SwitchChunk(bool packet_open) {
  const uint64_t total = logical_total();
  if (dropping_) {
    // Still no chunk: keep scribbling over the scratch chunk.
    cur_ = scratch_.get();
    base_total_ = total;
    base_ptr_ = cur_;
    return;
  }
  {
    absl::MutexLock lock(&chunk_mu_);
    if (chunk_ != nullptr && packet_open) {
      // The packet goes on in the next chunk: close its fragment here.
      buffer::WriteRedundantVarInt(
          static_cast<uint32_t>(cur_ - fragment_header_) - kFragmentHeaderSize, fragment_header_);
      chunk_flags_ |= buffer::kLastPacketContinuesOnNextChunk;
      // Lengths still open in this chunk can only be patched from now on.
      const uint8_t* payload = chunk_ + buffer::kChunkHeaderSize;
      for (int d = 1; d <= depth_; d++) {
        ProtoMessage& m = nests_[d];
        if (m.patch_ != nullptr || m.size_field_ < payload ||
            m.size_field_ >= chunk_ + chunk_size_) {
          continue;
        }
        patches_.push_back(
            PendingPatch{chunk_id_, static_cast<uint32_t>(m.size_field_ - payload), {}, false});
        m.patch_ = &patches_.back();
        m.size_field_ = m.patch_->data;
        chunk_flags_ |= buffer::kChunkNeedsPatching;
      }
    }
    CommitCurrentChunk();
  }
  AcquireChunk(packet_open);
  if (!dropping_ && packet_open) {
    absl::MutexLock lock(&chunk_mu_);
    chunk_flags_ |= buffer::kFirstPacketContinuesFromPrevChunk;
    BeginFragment();
  }
  base_total_ = total;
  base_ptr_ = cur_;
}

void TraceWriter::CommitCurrentChunk() {
  if (chunk_ == nullptr) return;
  buffer::WriteChunkHeader(buffer::ChunkHeader{chunk_id_, writer_id_, fragments_, chunk_flags_},
                           chunk_);
  last_chunk_continued_ = (chunk_flags_ & buffer::kLastPacketContinuesOnNextChunk) != 0;
  CommitEntry entry;
  entry.kind = CommitEntry::Kind::kChunk;
  entry.writer_id = writer_id_;
  entry.chunk = chunk_;
  producer_->Enqueue(std::move(entry));
  stats_.chunks_committed++;
  chunk_ = nullptr;
  cur_ = end_ = nullptr;
  chunk_id_++;
  fragments_ = 0;
  chunk_flags_ = 0;
  published_.store(0, std::memory_order_relaxed);
}

void TraceWriter::AcquireChunk(bool continuing) {
  // Not under chunk_mu_: under kStall this may wait for the owner thread.
  uint8_t* chunk = producer_->AcquireChunk();
  if (chunk == nullptr) {
    EnterDropMode();
    return;
  }
  absl::MutexLock lock(&chunk_mu_);
  chunk_ = chunk;
  cur_ = chunk + buffer::kChunkHeaderSize;
  end_ = chunk + chunk_size_;
  fragments_ = 0;
  chunk_flags_ = 0;
  dropping_ = false;
  if (lost_packets_ && !continuing) {
    // Tell the reader that packets were dropped here. If the chunk before
    // ended mid-packet, the marker stands in for the rest of that packet.
    uint8_t* marker = cur_;
    BeginFragment();
    buffer::WriteRedundantVarInt(buffer::kPacketSizeDropPacket, marker);
    if (last_chunk_continued_) chunk_flags_ |= buffer::kFirstPacketContinuesFromPrevChunk;
    lost_packets_ = false;
  }
}

TraceWriter::PacketHandle TraceWriter::NewTracePacket(bool needs_incremental_state) {
  if (packet_open_) FinishTracePacket();
  if (clear_requested_.load(std::memory_order_relaxed) &&
      clear_requested_.exchange(false, std::memory_order_relaxed)) {
    ClearIncrementalState();
  }

  // Room for a fragment header, a drop marker and at least a byte of packet.
  constexpr ptrdiff_t kMinRoom = 2 * kFragmentHeaderSize + 1;
  if (chunk_ != nullptr &&
      (end_ - cur_ < kMinRoom || fragments_ + 2 > buffer::kMaxFragmentsPerChunk)) {
    absl::MutexLock lock(&chunk_mu_);
    CommitCurrentChunk();
  }
  dropping_ = false;
  if (chunk_ == nullptr) AcquireChunk(/*continuing=*/false);
  packet_open_ = true;
  if (!dropping_) BeginFragment();
  base_total_ = 0;
  base_ptr_ = cur_;
  depth_ = 0;
  ProtoMessage& root = nests_[0];
  root.depth_ = 0;
  root.size_field_ = nullptr;
  root.patch_ = nullptr;
  root.begin_total_ = 0;

  using trace::TracePacket;
  if (first_packet_) {
    root.AppendBool(TracePacket::kFirstPacketOnSequenceFieldNumber, true);
    first_packet_ = false;
  }
  uint32_t flags = 0;
  state_cleared_for_packet_ = state_cleared_;
  if (state_cleared_) {
    flags |= TracePacket::SEQ_INCREMENTAL_STATE_CLEARED;
    state_cleared_ = false;
  }
  if (needs_incremental_state) flags |= TracePacket::SEQ_NEEDS_INCREMENTAL_STATE;
  if (flags != 0) root.AppendVarInt(TracePacket::kSequenceFlagsFieldNumber, flags);
  return PacketHandle(this);
}

void TraceWriter::FinishTracePacket() {
  if (!packet_open_) return;
  EndNestedAbove(0);
  packet_open_ = false;
  if (dropping_) {
    // Written into the scratch chunk: gone. The next chunk says so.
    stats_.packets_dropped++;
    lost_packets_ = true;
    dropping_ = false;
    cur_ = end_ = nullptr;
    if (!patches_.empty()) SendFinalPatches();
    return;
  }
  const uint32_t fragment_size =
      static_cast<uint32_t>(cur_ - fragment_header_) - static_cast<uint32_t>(kFragmentHeaderSize);
  buffer::WriteRedundantVarInt(fragment_size, fragment_header_);
  stats_.packets_written++;
  stats_.bytes_written += logical_total();
  PublishForScraping();
  if (!patches_.empty()) SendFinalPatches();
}

void TraceWriter::PublishForScraping() {
  // Every fragment in the chunk is now complete.
  const uint64_t bytes =
      static_cast<uint64_t>(cur_ - (end_ - chunk_size_)) - buffer::kChunkHeaderSize;
  published_.store(bytes << 16 | fragments_, std::memory_order_release);
}

void TraceWriter::SendFinalPatches() {
  while (!patches_.empty() && patches_.front().final) {
    CommitEntry entry;
    entry.kind = CommitEntry::Kind::kPatches;
    entry.writer_id = writer_id_;
    entry.chunk_id = patches_.front().chunk_id;
    while (!patches_.empty() && patches_.front().final &&
           patches_.front().chunk_id == entry.chunk_id) {
      const PendingPatch& p = patches_.front();
      buffer::TraceBuffer::Patch patch;
      patch.offset_untrusted = p.offset;
      std::memcpy(patch.data.data(), p.data, 4);
      entry.patches.push_back(patch);
      patches_.pop_front();
    }
    for (const PendingPatch& p : patches_) {
      if (p.chunk_id == entry.chunk_id) entry.other_patches_pending = true;
    }
    stats_.patches_sent += entry.patches.size();
    producer_->Enqueue(std::move(entry));
  }
}

void TraceWriter::Flush() {
  if (packet_open_) FinishTracePacket();
  {
    absl::MutexLock lock(&chunk_mu_);
    if (chunk_ != nullptr && fragments_ > 0) CommitCurrentChunk();
  }
  SendFinalPatches();
}

void TraceWriter::Scrape() {
  absl::MutexLock lock(&chunk_mu_);
  if (chunk_ == nullptr) return;
  const uint64_t published = published_.load(std::memory_order_acquire);
  const uint16_t fragments = static_cast<uint16_t>(published & 0xffff);
  const size_t bytes = static_cast<size_t>(published >> 16);
  if (fragments == 0) return;
  // The complete fragments, then an empty one standing for the packet being
  // written: a scraped chunk's last fragment is never read.
  CommitEntry entry;
  entry.kind = CommitEntry::Kind::kScrapedChunk;
  entry.writer_id = writer_id_;
  entry.scraped.assign(chunk_size_, 0);
  buffer::WriteChunkHeader(
      buffer::ChunkHeader{
          chunk_id_, writer_id_, static_cast<uint16_t>(fragments + 1),
          static_cast<uint8_t>(chunk_flags_ & buffer::kFirstPacketContinuesFromPrevChunk)},
      entry.scraped.data());
  std::memcpy(entry.scraped.data() + buffer::kChunkHeaderSize, chunk_ + buffer::kChunkHeaderSize,
              bytes);
  producer_->Enqueue(std::move(entry));
}

uint64_t TraceWriter::Intern(uint32_t interned_data_field, std::string_view s, bool* is_new) {
  auto& table = interned_[interned_data_field];
  auto it = table.find(absl::string_view(s.data(), s.size()));
  if (it != table.end()) {
    *is_new = false;
    return it->second;
  }
  uint64_t& next = next_iid_[interned_data_field];
  const uint64_t iid = ++next;
  table.emplace(std::string(s), iid);
  *is_new = true;
  return iid;
}

void TraceWriter::ClearIncrementalState() {
  for (auto& [field, table] : interned_) table.clear();
  state_cleared_ = !state_elsewhere_;
}

}  // namespace ringside::agent
