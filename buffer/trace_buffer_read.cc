// TraceBuffer's sequence reader: the outer walk in buffer order, the inner
// walk of one sequence in ChunkID order, the reassembly of fragmented
// packets, and the erase mode the overwrite uses.

#include <cstring>

#include "absl/base/attributes.h"
#include "buffer/internal/trace_buffer_memory.h"
#include "buffer/trace_buffer.h"

namespace ringside::buffer {

// --- Reading -----------------------------------------------------------------

void TraceBuffer::BeginRead() {
  if (index_pending_) {
    if (!clone_complete()) return;  // Reads as empty until it is.
    RebuildChunkIndex();
  }
  durable_pass_.Begin(durable_.get());
  read_pass_++;
  read_iterator_valid_ = true;
  reading_target_ = false;
  if (data_end_ > wr_) {
    rd_ = wr_;
    rd_in_older_lap_ = true;
  } else {
    rd_ = 0;
    rd_in_older_lap_ = false;
  }
}

bool TraceBuffer::AdvanceReadCursor() {
  rd_ += FirstWordAt(rd_) & kSizeMask;
  if (rd_in_older_lap_ && rd_ >= data_end_) {
    rd_ = 0;
    rd_in_older_lap_ = false;
  }
  return rd_in_older_lap_ || rd_ < wr_;
}

bool TraceBuffer::ReadNextTracePacket(TracePacket* packet,
                                      PacketSequenceProperties* sequence_properties,
                                      uint32_t* previous_packet_on_sequence_dropped) {
  if (!read_iterator_valid_) BeginRead();
  packet->Clear();
  if (!read_iterator_valid_) return false;  // A clone not yet complete.
  if (const DurableReadPass::Entry* d = durable_pass_.Next(); d != nullptr) {
    // Descriptors first: the ring packets after them may name what they describe.
    packet->AddSlice(reinterpret_cast<const uint8_t*>(d->packet.data()), d->packet.size());
    *sequence_properties = PacketSequenceProperties{};
    sequence_properties->producer_id_trusted = d->producer;
    sequence_properties->writer_id = d->writer;
    sequence_properties->durable = true;
    *previous_packet_on_sequence_dropped = 0;
    return true;
  }
  if (!rd_in_older_lap_ && rd_ >= wr_) return false;
  for (;;) {
    if (!reading_target_) {
      const uint32_t word = FirstWordAt(rd_);
      SequenceState* seq = nullptr;
      if ((word & kPaddingBit) == 0 && (ChunkAt(rd_)->flags & kErased) == 0) {
        seq = FindSequence(ChunkAt(rd_)->producer_id, ChunkAt(rd_)->writer_id);
      }
      if (seq == nullptr || seq->stalled_in_pass == read_pass_) {
        if (!AdvanceReadCursor()) return false;
        continue;
      }
      reading_target_ = true;
      // Overlap the misses of the next chunk in buffer order with this one.
      const uint32_t next = rd_ + (word & kSizeMask);
      const uint32_t prefetch_end = static_cast<uint32_t>(std::min<size_t>(next + 4096, size_));
      for (uint32_t line = next; line < prefetch_end; line += 64) {
        __builtin_prefetch(memory_ + line);
      }
      // Stays valid for the pass: sweeping only removes sequences that were
      // already empty before this one, and writes end the pass.
      reading_seq_ = seq;
    }
    SequenceState* seq = reading_seq_;
    if (ReadInSequence(*seq, rd_, Mode::kRead, packet)) {
      *sequence_properties =
          PacketSequenceProperties{seq->producer_id, seq->identity, seq->writer_id};
      *previous_packet_on_sequence_dropped = seq->pending_loss;
      seq->pending_loss = 0;
      return true;
    }
    reading_target_ = false;
    if (!AdvanceReadCursor()) return false;
  }
}

void TraceBuffer::Consume(SequenceState& seq, TBChunk* c, uint32_t new_consumed, Mode mode) {
  if (mode == Mode::kErase && new_consumed > c->payload_consumed) {
    c->flags |= kLostInErase;
    AddLoss(seq, kDataLossOverwrite);
  }
  c->payload_consumed = static_cast<uint16_t>(new_consumed);
}

void TraceBuffer::PopFrontChunk(SequenceState& seq, TBChunk* c, Mode mode) {
  const ChunkID chunk_id = seq.chunks.front_id();
  if (mode == Mode::kErase) {
    const bool lost = (c->flags & kLostInErase) != 0;
    if (lost) {
      stats_.chunks_overwritten++;
      stats_.bytes_overwritten += c->outer_size();
      stats_.data_loss_overwrite++;
      AddLoss(seq, kDataLossOverwrite);
    }
    if (c->flags & kIncomplete) {
      // Its unreadable last fragment is lost only if the chunk is not
      // committed again before the sequence moves on (see CheckForGap).
      seq.has_evicted_incomplete = true;
      seq.evicted_incomplete_id = chunk_id;
      seq.evicted_incomplete_consumed = c->payload_consumed;
      seq.evicted_incomplete_uncounted_bytes = lost ? 0 : c->outer_size();
    }
  } else {
    stats_.chunks_read++;
    stats_.bytes_read += c->outer_size();
    c->history |= kReadOut;  // Its bytes stay until overwritten: a rewound clone reads them.
  }
  c->flags |= kErased;
  seq.chunks.pop_front();
  live_chunks_--;
  seq.last_consumed = chunk_id;
  seq.has_last_consumed = true;
  if (seq.chunks.empty()) OnSequenceEmpty(seq);
}

bool TraceBuffer::ReadInSequence(SequenceState& seq, uint32_t target_offset, Mode mode,
                                 TracePacket* packet) {
  for (;;) {
    if (seq.chunks.empty() || (ChunkAt(target_offset)->flags & kErased) != 0) return false;
    if (mode == Mode::kRead && seq.stalled_in_pass == read_pass_) return false;

    TBChunk* c = MutableChunkAt(seq.chunks.front().offset);
    if ((c->flags & kSeen) == 0 && mode == Mode::kRead) {
      // First visit: the fragment walk ahead is a chain of dependent loads,
      // so fetch every line of the chunk now to overlap the misses.
      for (uint32_t line = 0; line < c->payload_size; line += 64) {
        __builtin_prefetch(c->payload() + line);
      }
    }
    CheckForGap(seq, c);

    const uint32_t consumed = c->payload_consumed;
    if (consumed >= c->payload_size) {
      if (c->flags & kCorrupted) ReportCorruption(seq, c);
      if ((c->flags & kIncomplete) && mode == Mode::kRead) {
        seq.stalled_in_pass = read_pass_;  // The final commit may add more.
        return false;
      }
      PopFrontChunk(seq, c, mode);
      continue;
    }

    uint32_t fragment_size = 0;
    const uint8_t* payload = c->payload();
    const size_t header =
        ReadFragmentSize(payload + consumed, payload + c->payload_size, &fragment_size);
    const bool drop = fragment_size == kPacketSizeDropPacket;
    const uint32_t data_offset = consumed + static_cast<uint32_t>(header);
    const uint32_t data_size = drop ? 0 : fragment_size;
    if (header == 0 || data_offset + uint64_t{data_size} > c->payload_size) {
      // Only a patch could have broken a fragment validated at commit time.
      stats_.abi_violations++;
      c->flags |= kCorrupted;
      Consume(seq, c, c->payload_size, mode);
      continue;
    }
    const uint32_t fragment_end = data_offset + data_size;
    const bool is_first = consumed == 0;
    const bool is_last = fragment_end == c->payload_size && (c->flags & kIncomplete) == 0;

    if (is_last && (c->flags & kChunkNeedsPatching) && mode == Mode::kRead) {
      seq.stalled_in_pass = read_pass_;
      return false;
    }
    if (drop) {
      Consume(seq, c, fragment_end, mode);
      stats_.trace_writer_packet_loss++;
      AddLoss(seq, kDataLossWriterAbort);
      continue;
    }
    if (is_first && (c->flags & kFirstPacketContinuesFromPrevChunk)) {
      // A continuation whose beginning is gone.
      Consume(seq, c, fragment_end, mode);
      stats_.data_loss_orphan_continuation++;
      AddLoss(seq, kDataLossOrphanContinuation);
      continue;
    }
    if (!(is_last && (c->flags & kLastPacketContinuesOnNextChunk))) {
      Consume(seq, c, fragment_end, mode);
      if (data_size == 0) continue;  // An empty packet carries nothing.
      packet->Clear();
      packet->AddSlice(payload + data_offset, data_size);
      return true;
    }
    switch (Reassemble(seq, mode, packet)) {
      case Reassembly::kDone:
        return true;
      case Reassembly::kNeedMoreData:
        seq.stalled_in_pass = read_pass_;
        return false;
      case Reassembly::kLost:
        continue;
    }
  }
}

// Always inlined: on the read path, it stays part of Reassemble() in the
// compiled code, as before it had a name.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline TraceBuffer::ReassemblyEnd TraceBuffer::FindReassemblyEnd(
    SequenceState& seq, Mode mode) {
  ReassemblyEnd end;
  ChunkID prev_id = seq.chunks.front().chunk_id;
  for (end.index = 1;; end.index++) {
    if (end.index >= seq.chunks.size()) {
      // The rest has not been committed yet: wait, unless the chunk is going.
      end.lost_reason = mode == Mode::kRead ? 0u : uint32_t{kDataLossOverwrite};
      return end;
    }
    const ChunkRef ref = seq.chunks[end.index];
    TBChunk* next = MutableChunkAt(ref.offset);
    if (ref.chunk_id != prev_id + 1) {
      end.lost_reason = kDataLossReassemblyGap;
      return end;
    }
    if (next->payload_size == 0) {
      if (next->flags & kIncomplete) {
        // Its final commit may bring the fragment: wait, unless erasing.
        end.lost_reason = mode == Mode::kRead ? 0u : uint32_t{kDataLossOverwrite};
        return end;
      }
      if (next->flags & kCorrupted) {
        // The continuation it carried was malformed and dropped.
        end.lost_reason = kDataLossReassemblyBrokenChain;
        return end;
      }
      // A chunk with no fragments at all (an idle writer flushed it) carries
      // nothing of this packet nor breaks it: the chain goes on after it.
      prev_id = ref.chunk_id;
      continue;
    }
    if ((next->flags & kFirstPacketContinuesFromPrevChunk) == 0 || next->payload_consumed != 0) {
      end.lost_reason = kDataLossReassemblyBrokenChain;
      return end;
    }
    uint32_t piece_size = 0;
    const size_t piece_header =
        ReadFragmentSize(next->payload(), next->payload() + next->payload_size, &piece_size);
    const bool drop = piece_size == kPacketSizeDropPacket;
    const uint32_t piece_data_size = drop ? 0 : piece_size;
    if (piece_header == 0 || piece_header + uint64_t{piece_data_size} > next->payload_size) {
      end.lost_reason = kDataLossChunkCorrupted;
      return end;
    }
    const uint32_t piece_end = static_cast<uint32_t>(piece_header) + piece_data_size;
    const bool piece_is_last = piece_end == next->payload_size && (next->flags & kIncomplete) == 0;
    if (piece_is_last && (next->flags & kChunkNeedsPatching) && mode == Mode::kRead) return end;
    if (drop) {
      // The writer abandoned this packet; the marker is consumed with it.
      Consume(seq, next, piece_end, mode);
      stats_.trace_writer_packet_loss++;
      end.lost_reason = kDataLossWriterAbort;
      return end;
    }
    reassembly_pieces_.push_back(
        TracePacket::Slice{next->payload() + piece_header, piece_data_size});
    if (piece_is_last && (next->flags & kLastPacketContinuesOnNextChunk)) {
      prev_id = ref.chunk_id;
      continue;
    }
    end.chunk = next;
    end.fragment_end = piece_end;
    return end;
  }
}

void TraceBuffer::DropReassembly(SequenceState& seq, TBChunk* begin, uint32_t lost_reason,
                                 Mode mode) {
  // Drop the beginning; whatever follows reads on (orphans are flagged).
  Consume(seq, begin, begin->payload_size, mode);
  switch (lost_reason) {
    case kDataLossReassemblyGap:
      stats_.data_loss_reassembly_gap++;
      break;
    case kDataLossReassemblyBrokenChain:
      stats_.data_loss_reassembly_broken_chain++;
      break;
    case kDataLossChunkCorrupted:
      stats_.data_loss_chunk_corrupted++;
      break;
    default:
      break;
  }
  AddLoss(seq, lost_reason);
}

TraceBuffer::Reassembly TraceBuffer::Reassemble(SequenceState& seq, Mode mode,
                                                TracePacket* packet) {
  TBChunk* begin = MutableChunkAt(seq.chunks.front().offset);
  uint32_t size = 0;
  const size_t header = ReadFragmentSize(begin->payload() + begin->payload_consumed,
                                         begin->payload() + begin->payload_size, &size);
  reassembly_pieces_.clear();
  reassembly_pieces_.push_back(
      TracePacket::Slice{begin->payload() + begin->payload_consumed + header, size});

  const ReassemblyEnd end = FindReassemblyEnd(seq, mode);
  if (end.chunk == nullptr && end.lost_reason == 0) {
    stats_.readaheads_failed++;
    return Reassembly::kNeedMoreData;
  }
  if (end.chunk == nullptr) {
    DropReassembly(seq, begin, end.lost_reason, mode);
    return Reassembly::kLost;
  }

  packet->AssignOwned(reassembly_pieces_);
  stats_.readaheads_succeeded++;
  // Consume the beginning and every middle chunk whole, and the first
  // fragment of the end chunk, which stays for its other packets.
  for (size_t j = 0; j < end.index; j++) {
    TBChunk* c = MutableChunkAt(seq.chunks.front().offset);
    Consume(seq, c, c->payload_size, mode);
    PopFrontChunk(seq, c, mode);
  }
  Consume(seq, end.chunk, end.fragment_end, mode);
  return Reassembly::kDone;
}

}  // namespace ringside::buffer
