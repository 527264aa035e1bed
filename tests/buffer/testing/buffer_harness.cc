#include "tests/buffer/testing/buffer_harness.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"
#include "buffer/wire_format.h"

namespace ringside::buffer::testing {
namespace {

constexpr ProducerID kHostileProducer = 3;
constexpr int kHonestSequences = 6;  // Producers 1..2 x writers 0..2.

uint32_t Fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

// Reads the script; past its end every value is 0.
class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | U8() << 8); }
  std::string Bytes(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; i++) s.push_back(static_cast<char>(U8()));
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// What the reference model knows about one chunk of a well-behaved writer.
struct ChunkStatus {
  enum State { kNotCommitted, kScraped, kCommitted };
  State state = kNotCommitted;
  uint16_t scraped_fragments = 0;    // num_fragments of the scraped copy.
  uint16_t last_fragment_index = 0;  // In the final chunk.
  bool patch_pending = false;
};

// One thing a writer wrote: a packet (its fragments' chunk and index) or a
// drop marker.
struct Item {
  bool is_drop = false;
  uint32_t serial = 0;
  std::vector<std::pair<ChunkID, uint16_t>> fragments;
};

struct PendingCommit {
  ChunkID chunk_id = 0;
  uint8_t flags = 0;
  std::string payload;
  uint16_t num_fragments = 0;
};

struct PendingPatch {
  ChunkID chunk_id = 0;
  size_t offset = 0;
  std::array<uint8_t, 4> data{};
};

// A writer that follows the chunk ABI the way a TraceWriter does.
class HonestWriter {
 public:
  HonestWriter(ProducerID producer, WriterID writer, size_t capacity, ChunkID first_chunk_id)
      : producer_(producer), writer_(writer), capacity_(capacity), chunk_id_(first_chunk_id) {}

  ProducerID producer() const { return producer_; }
  WriterID writer() const { return writer_; }
  void set_patch_if_split(bool v) { patch_if_split_ = v; }
  bool patch_if_split() const { return patch_if_split_; }
  // Flush an empty chunk between the pieces of every split packet, as an idle
  // writer's flush can land there.
  void set_empty_chunk_if_split(bool v) { empty_chunk_if_split_ = v; }
  bool empty_chunk_if_split() const { return empty_chunk_if_split_; }

  void WritePacket(size_t size) {
    const std::string packet = MakeHarnessPacket(producer_, writer_, next_serial_, size);
    Item item{false, next_serial_++, {}};
    size_t offset = 0;
    bool continuing = false;
    for (;;) {
      if (capacity_ - current_.size() <= kFragmentHeaderSize ||
          fragments_ >= kMaxFragmentsPerChunk) {
        FinishChunk();
      }
      if (continuing && fragments_ == 0) flags_ |= kFirstPacketContinuesFromPrevChunk;
      const size_t n =
          std::min(capacity_ - current_.size() - kFragmentHeaderSize, packet.size() - offset);
      const size_t data_offset = AppendFragment(packet.substr(offset, n));
      item.fragments.emplace_back(chunk_id_, fragments_ - 1);
      offset += n;
      if (offset == packet.size()) break;
      // The packet goes on in the next chunk.
      flags_ |= kLastPacketContinuesOnNextChunk;
      if (patch_if_split_ && n >= 4) {
        // Leave a hole, as a writer does for a size it does not know yet.
        PendingPatch patch{chunk_id_, data_offset, {}};
        for (int i = 0; i < 4; i++) {
          patch.data[i] = static_cast<uint8_t>(current_[data_offset + i]);
          current_[data_offset + i] = 0;
        }
        patches_.push_back(patch);
        flags_ |= kChunkNeedsPatching;
      }
      FinishChunk();
      if (empty_chunk_if_split_) {
        finished_.push_back(PendingCommit{chunk_id_, 0, std::string(capacity_, '\0'), 0});
        chunk_id_++;
      }
      continuing = true;
    }
    items_.push_back(std::move(item));
  }

  void DropPackets(uint32_t n) {
    if (capacity_ - current_.size() < kFragmentHeaderSize || fragments_ >= kMaxFragmentsPerChunk) {
      FinishChunk();
    }
    uint8_t header[kFragmentHeaderSize];
    WriteRedundantVarInt(kPacketSizeDropPacket, header);
    current_.append(reinterpret_cast<const char*>(header), sizeof(header));
    fragments_++;
    items_.push_back(Item{true, 0, {{chunk_id_, static_cast<uint16_t>(fragments_ - 1)}}});
    next_serial_ += n;
  }

  // Ends the chunk being written (a flush), queueing it for commit.
  void FinishChunk() {
    if (fragments_ == 0) return;
    ChunkStatus& s = status_[chunk_id_];
    s.last_fragment_index = static_cast<uint16_t>(fragments_ - 1);
    s.patch_pending = (flags_ & kChunkNeedsPatching) != 0;
    std::string payload = current_;
    payload.resize(capacity_, '\0');
    finished_.push_back(PendingCommit{chunk_id_, flags_, std::move(payload), fragments_});
    chunk_id_++;
    current_.clear();
    fragments_ = 0;
    flags_ = 0;
  }

  // The chunk being written, as a scrape sees it: its last fragment may be
  // in progress, so the buffer must not read it.
  bool Scrape(PendingCommit* out) {
    if (fragments_ == 0) return false;
    std::string payload = current_;
    payload.resize(capacity_, '\0');
    *out = PendingCommit{chunk_id_, flags_, std::move(payload), fragments_};
    return true;
  }

  std::vector<PendingCommit>& finished() { return finished_; }
  std::deque<PendingPatch>& patches() { return patches_; }
  std::map<ChunkID, ChunkStatus>& status() { return status_; }
  const std::vector<Item>& items() const { return items_; }

  bool Readable(const Item& item) const {
    for (const auto& [chunk_id, index] : item.fragments) {
      auto it = status_.find(chunk_id);
      if (it == status_.end()) return false;
      const ChunkStatus& s = it->second;
      switch (s.state) {
        case ChunkStatus::kNotCommitted:
          return false;
        case ChunkStatus::kScraped:
          if (index + 1 >= s.scraped_fragments) return false;
          break;
        case ChunkStatus::kCommitted:
          if (index == s.last_fragment_index && s.patch_pending) return false;
          break;
      }
    }
    return true;
  }

 private:
  // Appends a fragment; returns the payload offset of its data.
  size_t AppendFragment(const std::string& data) {
    uint8_t header[kFragmentHeaderSize];
    WriteRedundantVarInt(static_cast<uint32_t>(data.size()), header);
    current_.append(reinterpret_cast<const char*>(header), sizeof(header));
    const size_t data_offset = current_.size();
    current_.append(data);
    fragments_++;
    return data_offset;
  }

  ProducerID producer_;
  WriterID writer_;
  size_t capacity_;
  bool patch_if_split_ = false;
  bool empty_chunk_if_split_ = false;
  uint32_t next_serial_ = 0;
  ChunkID chunk_id_;
  std::string current_;
  uint16_t fragments_ = 0;
  uint8_t flags_ = 0;
  std::vector<PendingCommit> finished_;
  std::deque<PendingPatch> patches_;
  std::map<ChunkID, ChunkStatus> status_;
  std::vector<Item> items_;
};

// What a reader has seen of one well-behaved sequence.
struct SequenceCheck {
  int64_t last_serial = -1;
  size_t model_next = 0;  // Next model item expected.
  uint32_t model_pending_loss = 0;
};

class Harness {
 public:
  Harness(const uint8_t* data, size_t size, const HarnessOptions& options)
      : script_(data, size), options_(options) {}

  HarnessResult Run() {
    size_t size = options_.buffer_size;
    auto policy = TraceBuffer::OverwritePolicy::kOverwrite;
    if (size == 0) {
      size = 4096 * (1 + script_.U8() % 4);
      if (script_.U8() % 8 == 0) policy = TraceBuffer::OverwritePolicy::kDiscard;
    }
    buffer_ = TraceBuffer::Create(size, policy);
    // Blocks far smaller than the buffer, so clones stay in progress while
    // the script goes on writing, reading and patching.
    buffer_->SetCloneBlockSizeForTesting(256);
    for (int i = 0; i < kHonestSequences; i++) {
      // Low nibble: chunk size. High nibble: the first ChunkID (a writer's IDs
      // need not start at 0 in the buffer; 0xf0 wraps at once).
      const uint8_t b = script_.U8();
      writers_.emplace_back(static_cast<ProducerID>(1 + i / 3), static_cast<WriterID>(i % 3),
                            64 + 60 * (b % 16), (b >> 4) * ChunkID{0x11111111});
    }
    checks_.resize(kHonestSequences);

    while (!script_.done() && result_.ok) {
      RunOperation();
      result_.operations++;
      CheckStats();
    }
    if (cow_clone_ != nullptr) {
      buffer_->ContinueClone(SIZE_MAX);
      CheckCowClone();
    }
    if (result_.ok) ReadAllAndCheck(buffer_.get(), &checks_, /*from_clone=*/false);
    result_.wrapped = !ModelApplies();
    return result_;
  }

 private:
  void Fail(const std::string& what) {
    if (!result_.ok) return;
    result_.ok = false;
    result_.failure = absl::StrCat("operation #", result_.operations, ": ", what);
  }

  bool ModelApplies() const {
    const TraceBuffer::Stats& s = buffer_->stats();
    return options_.check_model && s.write_wrap_count == 0 && s.chunks_discarded == 0 &&
           s.chunks_overwritten == 0;
  }

  void Commit(HonestWriter& w, const PendingCommit& c, bool complete) {
    buffer_->CopyChunkUntrusted(
        w.producer(), ClientIdentity{1000, 1}, w.writer(), c.chunk_id, c.num_fragments, c.flags,
        complete, reinterpret_cast<const uint8_t*>(c.payload.data()), c.payload.size());
  }

  // Commits every finished chunk of `w` as one batch, in an order the script
  // chooses (SMB scraping commits in arbitrary order).
  void CommitBatch(HonestWriter& w, uint8_t order) {
    std::vector<PendingCommit>& batch = w.finished();
    if (batch.size() > 1) {
      if (order & 1) std::reverse(batch.begin(), batch.end());
      std::rotate(batch.begin(), batch.begin() + (order >> 1) % batch.size(), batch.end());
    }
    for (const PendingCommit& c : batch) {
      Commit(w, c, true);
      w.status()[c.chunk_id].state = ChunkStatus::kCommitted;
    }
    batch.clear();
  }

  void RunOperation() {
    const uint8_t op_byte = script_.U8();
    const uint8_t op = op_byte % 12;
    HonestWriter& w = writers_[script_.U8() % kHonestSequences];
    if (cow_clone_ != nullptr) {
      // A copy-on-write clone in progress: 0..3 more blocks of it per
      // operation, the rest left to the writes that meet them.
      buffer_->ContinueClone((op_byte / 12) % 4 * 256);
      CheckCowClone();
    }
    switch (op) {
      case 0: {  // Write packets.
        const int count = 1 + script_.U8() % 4;
        for (int i = 0; i < count; i++) w.WritePacket(17 + script_.U16() % 2000);
        break;
      }
      case 1:  // Flush: end the chunk, commit the batch.
        w.FinishChunk();
        CommitBatch(w, script_.U8());
        break;
      case 2: {  // Scrape: commit the batch and the chunk being written.
        CommitBatch(w, script_.U8());
        PendingCommit scraped;
        if (w.Scrape(&scraped)) {
          Commit(w, scraped, false);
          ChunkStatus& s = w.status()[scraped.chunk_id];
          s.state = ChunkStatus::kScraped;
          s.scraped_fragments = scraped.num_fragments;
        }
        break;
      }
      case 3:
        w.DropPackets(1 + script_.U8() % 5);
        break;
      case 4: {  // Deliver patches whose chunk has been committed.
        const int n = script_.U8() % 4;
        for (int i = 0; i < n && !w.patches().empty(); i++) {
          const PendingPatch p = w.patches().front();
          ChunkStatus& s = w.status()[p.chunk_id];
          if (s.state != ChunkStatus::kCommitted) break;
          w.patches().pop_front();
          TraceBuffer::Patch patch{p.offset, p.data};
          const bool applied = buffer_->TryPatchChunkContents(w.producer(), w.writer(), p.chunk_id,
                                                              &patch, 1, false);
          if (!applied && ModelApplies()) Fail("patch of a chunk still in the buffer refused");
          s.patch_pending = false;
        }
        break;
      }
      case 5: {  // Read a few packets, maybe starting a new pass.
        if (script_.U8() & 1) buffer_->BeginRead();
        const int n = 1 + script_.U8() % 32;
        TracePacket packet;
        PacketSequenceProperties props;
        uint32_t loss = 0;
        for (int i = 0; i < n && buffer_->ReadNextTracePacket(&packet, &props, &loss); i++) {
          CheckPacket(packet, props, loss, &checks_, false);
        }
        break;
      }
      case 6:
        ReadAllAndCheck(buffer_.get(), &checks_, false);
        break;
      case 7: {                            // Clone and read the clone; the original is untouched.
        if (cow_clone_ != nullptr) break;  // One clone at a time.
        std::unique_ptr<TraceBuffer> clone = buffer_->CloneReadOnly();
        if (clone == nullptr) {
          Fail("CloneReadOnly failed");
          break;
        }
        std::vector<SequenceCheck> clone_checks = checks_;
        ReadAllAndCheck(clone.get(), &clone_checks, true);
        CheckEverythingClone();
        if (op_byte / 12 % 2 == 0) break;
        // And a copy-on-write clone of the same state, to be read once the
        // script has gone on long enough to complete it: it must read exactly
        // as the clone just read did.
        cow_expected_ = ReadEverything(buffer_->CloneReadOnly().get());
        cow_bytes_written_at_clone_ = buffer_->stats().bytes_written;
        cow_clone_ = buffer_->BeginClone();
        if (cow_clone_ == nullptr) Fail("BeginClone failed");
        CheckCowClone();
        break;
      }
      case 8:
        if (options_.allow_hostile) HostileCommit();
        break;
      case 9:
        if (options_.allow_hostile) HostilePatch();
        break;
      case 10:
        w.set_patch_if_split(!w.patch_if_split());
        break;
      case 11:
        w.set_empty_chunk_if_split(!w.empty_chunk_if_split());
        break;
    }
  }

  struct ReadResult {
    std::string data;
    uint32_t loss = 0;
    ProducerID producer = 0;
    WriterID writer = 0;
    bool operator==(const ReadResult&) const = default;
  };

  static std::vector<ReadResult> ReadEverything(TraceBuffer* buffer) {
    std::vector<ReadResult> out;
    buffer->BeginRead();
    TracePacket packet;
    PacketSequenceProperties props;
    uint32_t loss = 0;
    while (buffer->ReadNextTracePacket(&packet, &props, &loss)) {
      out.push_back({packet.ToString(), loss, props.producer_id_trusted, props.writer_id});
    }
    return out;
  }

  // Once the copy-on-write clone is complete: it reads exactly what the eager
  // clone of the same moment read, and its stats are that moment's.
  void CheckCowClone() {
    if (cow_clone_ == nullptr || !cow_clone_->clone_complete()) return;
    if (buffer_->clone_in_progress()) Fail("clone complete but the original still copying");
    const std::vector<ReadResult> got = ReadEverything(cow_clone_.get());
    if (got != cow_expected_) {
      Fail(absl::StrCat("copy-on-write clone read ", got.size(), " packets, the eager clone ",
                        cow_expected_.size(), ", or their bytes or losses differ"));
    }
    result_.cow_clones_checked++;
    if (buffer_->stats().bytes_written > cow_bytes_written_at_clone_) {
      result_.cow_clones_written_over++;
    }
    cow_clone_.reset();
  }

  // A clone of everything the ring still holds reads, for each sequence of
  // the well-behaved writers, packets in serial order, none twice, ending
  // with exactly what an unread clone of the same moment reads.
  void CheckEverythingClone() {
    using Serials = std::map<std::pair<ProducerID, WriterID>, std::vector<uint32_t>>;
    auto serials_of = [this](TraceBuffer* clone) {
      Serials out;
      for (const ReadResult& r : ReadEverything(clone)) {
        uint16_t producer = 0, writer = 0;
        uint32_t serial = 0;
        if (r.producer == kHostileProducer) continue;
        if (!ParseHarnessPacket(r.data, &producer, &writer, &serial)) {
          Fail("an everything clone read a packet no writer wrote");
          continue;
        }
        out[{r.producer, r.writer}].push_back(serial);
      }
      return out;
    };
    const Serials unread = serials_of(buffer_->CloneReadOnly().get());
    const Serials everything =
        serials_of(buffer_->CloneReadOnly(TraceBuffer::CloneScope::kEverything).get());
    for (const auto& [seq, all] : everything) {
      for (size_t i = 1; i < all.size(); i++) {
        if (all[i] <= all[i - 1]) {
          Fail(absl::StrCat("everything clone: serial ", all[i], " after ", all[i - 1]));
          return;
        }
      }
    }
    for (const auto& [seq, tail] : unread) {
      auto it = everything.find(seq);
      const size_t n = it == everything.end() ? 0 : it->second.size();
      if (n < tail.size() ||
          !std::equal(tail.begin(), tail.end(), it->second.end() - tail.size())) {
        Fail("everything clone does not end with what the unread clone reads");
        return;
      }
      result_.everything_clone_packets_reread += n - tail.size();
    }
    result_.everything_clones_checked++;
  }

  void HostileCommit() {
    const WriterID writer = script_.U8() % 3;
    const ChunkID chunk_id = script_.U8() % 16;
    const uint8_t flags = script_.U8();
    const bool complete = script_.U8() & 1;
    const uint16_t num_fragments = script_.U16() % 1100;
    const std::string payload = script_.Bytes(script_.U16() % 700);
    buffer_->CopyChunkUntrusted(kHostileProducer, ClientIdentity{1000, 1}, writer, chunk_id,
                                num_fragments, flags, complete,
                                reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  }

  void HostilePatch() {
    const WriterID writer = script_.U8() % 3;
    const ChunkID chunk_id = script_.U8() % 16;
    TraceBuffer::Patch patch{script_.U16() % 800u, {script_.U8(), script_.U8(), 0, 0}};
    buffer_->TryPatchChunkContents(kHostileProducer, writer, chunk_id, &patch, 1, script_.U8() & 1);
  }

  void ReadAllAndCheck(TraceBuffer* buffer, std::vector<SequenceCheck>* checks, bool from_clone) {
    buffer->BeginRead();
    TracePacket packet;
    PacketSequenceProperties props;
    uint32_t loss = 0;
    while (result_.ok && buffer->ReadNextTracePacket(&packet, &props, &loss)) {
      CheckPacket(packet, props, loss, checks, from_clone);
    }
    if (!result_.ok || !ModelApplies()) return;
    // A full pass must have read everything the model says is readable.
    for (int i = 0; i < kHonestSequences; i++) {
      SequenceCheck& c = (*checks)[i];
      const HonestWriter& w = writers_[i];
      AdvanceOverDrops(w, &c);
      if (c.model_next < w.items().size() && w.Readable(w.items()[c.model_next])) {
        Fail(absl::StrCat(from_clone ? "clone: " : "", "sequence ", w.producer(), "/", w.writer(),
                          ": packet serial ", w.items()[c.model_next].serial,
                          " is readable but a full read pass did not return it"));
        return;
      }
    }
  }

  static void AdvanceOverDrops(const HonestWriter& w, SequenceCheck* c) {
    while (c->model_next < w.items().size() && w.items()[c->model_next].is_drop &&
           w.Readable(w.items()[c->model_next])) {
      c->model_pending_loss |= kDataLossPresent | kDataLossWriterAbort;
      c->model_next++;
    }
  }

  void CheckPacket(const TracePacket& packet, const PacketSequenceProperties& props, uint32_t loss,
                   std::vector<SequenceCheck>* checks, bool from_clone) {
    result_.packets_read++;
    if (loss != 0) result_.losses_flagged++;
    if (loss != 0 && (loss & kDataLossPresent) == 0) Fail("loss reported without PRESENT");
    if (props.producer_id_trusted == kHostileProducer) return;
    const std::string where = from_clone ? "clone: " : "";
    const int index = (props.producer_id_trusted - 1) * 3 + props.writer_id;
    if (props.producer_id_trusted < 1 || props.producer_id_trusted > 2 || props.writer_id > 2) {
      Fail(absl::StrCat(where, "packet from a sequence nobody wrote: ", props.producer_id_trusted,
                        "/", props.writer_id));
      return;
    }
    ProducerID producer;
    WriterID writer;
    uint32_t serial;
    if (!ParseHarnessPacket(packet.ToString(), &producer, &writer, &serial)) {
      Fail(absl::StrCat(where, "corrupt packet (", packet.size(), " bytes) on sequence ",
                        props.producer_id_trusted, "/", props.writer_id));
      return;
    }
    if (producer != props.producer_id_trusted || writer != props.writer_id) {
      Fail(absl::StrCat(where, "packet of ", producer, "/", writer, " read on sequence ",
                        props.producer_id_trusted, "/", props.writer_id));
      return;
    }
    SequenceCheck& c = (*checks)[index];
    if (static_cast<int64_t>(serial) <= c.last_serial) {
      Fail(absl::StrCat(where, "sequence ", producer, "/", writer, ": serial ", serial, " after ",
                        c.last_serial, " (out of order or duplicated)"));
      return;
    }
    if (static_cast<int64_t>(serial) != c.last_serial + 1 && loss == 0) {
      Fail(absl::StrCat(where, "sequence ", producer, "/", writer, ": serial ", serial, " after ",
                        c.last_serial, " without previous_packet_dropped"));
      return;
    }
    c.last_serial = serial;

    if (!ModelApplies()) return;
    const HonestWriter& w = writers_[index];
    AdvanceOverDrops(w, &c);
    if (c.model_next >= w.items().size()) {
      Fail(absl::StrCat(where, "model has no more packets for ", producer, "/", writer));
      return;
    }
    const Item& expected = w.items()[c.model_next];
    if (expected.serial != serial || !w.Readable(expected)) {
      Fail(absl::StrCat(where, "sequence ", producer, "/", writer, ": read serial ", serial,
                        ", model expected serial ", expected.serial,
                        w.Readable(expected) ? "" : " (not yet readable)"));
      return;
    }
    if (loss != c.model_pending_loss) {
      Fail(absl::StrCat(where, "sequence ", producer, "/", writer, " serial ", serial, ": loss ",
                        loss, ", model expected ", c.model_pending_loss));
      return;
    }
    c.model_pending_loss = 0;
    c.model_next++;
    result_.packets_checked_against_model++;
  }

  void CheckStats() {
    const TraceBuffer::Stats& s = buffer_->stats();
    using S = TraceBuffer::Stats;
    static constexpr std::pair<const char*, uint64_t S::*> kCounters[] = {
        {"bytes_written", &S::bytes_written},
        {"bytes_overwritten", &S::bytes_overwritten},
        {"bytes_read", &S::bytes_read},
        {"padding_bytes_written", &S::padding_bytes_written},
        {"padding_bytes_cleared", &S::padding_bytes_cleared},
        {"chunks_written", &S::chunks_written},
        {"chunks_rewritten", &S::chunks_rewritten},
        {"chunks_relocated", &S::chunks_relocated},
        {"chunks_overwritten", &S::chunks_overwritten},
        {"chunks_discarded", &S::chunks_discarded},
        {"chunks_read", &S::chunks_read},
        {"chunks_committed_out_of_order", &S::chunks_committed_out_of_order},
        {"write_wrap_count", &S::write_wrap_count},
        {"patches_succeeded", &S::patches_succeeded},
        {"patches_failed", &S::patches_failed},
        {"readaheads_succeeded", &S::readaheads_succeeded},
        {"readaheads_failed", &S::readaheads_failed},
        {"abi_violations", &S::abi_violations},
        {"trace_writer_packet_loss", &S::trace_writer_packet_loss},
        {"data_loss_read_gap", &S::data_loss_read_gap},
        {"data_loss_chunk_corrupted", &S::data_loss_chunk_corrupted},
        {"data_loss_orphan_continuation", &S::data_loss_orphan_continuation},
        {"data_loss_reassembly_gap", &S::data_loss_reassembly_gap},
        {"data_loss_reassembly_broken_chain", &S::data_loss_reassembly_broken_chain},
        {"data_loss_overwrite", &S::data_loss_overwrite},
        {"data_loss_missing_chunks", &S::data_loss_missing_chunks},
    };
    for (const auto& [name, field] : kCounters) {
      if (s.*field < last_stats_.*field) Fail(absl::StrCat("stat ", name, " went down"));
    }
    if (buffer_->used_size() > buffer_->size()) Fail("used_size beyond size");
    last_stats_ = s;
  }

  Script script_;
  HarnessOptions options_;
  HarnessResult result_;
  std::unique_ptr<TraceBuffer> buffer_;
  std::vector<HonestWriter> writers_;
  std::vector<SequenceCheck> checks_;
  std::unique_ptr<TraceBuffer> cow_clone_;
  std::vector<ReadResult> cow_expected_;
  uint64_t cow_bytes_written_at_clone_ = 0;
  TraceBuffer::Stats last_stats_;
};

}  // namespace

std::string MakeHarnessPacket(uint16_t producer, uint16_t writer, uint32_t serial, size_t size) {
  // field 1 fixed64 key, field 2 bytes filler, field 3 fixed32 checksum: a
  // valid protobuf message of exactly `size` bytes (size >= 17).
  size = std::max<size_t>(size, 17);
  size_t filler = size - 15 - 1;
  if (filler >= 128) filler = size - 15 - 2;
  std::string p;
  p.push_back('\x09');
  const uint64_t key = uint64_t{producer} << 48 | uint64_t{writer} << 32 | serial;
  for (int i = 0; i < 8; i++) p.push_back(static_cast<char>(key >> (8 * i)));
  p.push_back('\x12');
  AppendVarInt(filler, &p);
  for (size_t i = 0; i < filler; i++) p.push_back(static_cast<char>((serial * 7 + i) & 0xff));
  const uint32_t sum = Fnv1a(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  p.push_back('\x1d');
  for (int i = 0; i < 4; i++) p.push_back(static_cast<char>(sum >> (8 * i)));
  return p;
}

bool ParseHarnessPacket(const std::string& bytes, uint16_t* producer, uint16_t* writer,
                        uint32_t* serial) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 17 || p[0] != 0x09 || p[9] != 0x12 || p[n - 5] != 0x1d) return false;
  uint64_t key = 0;
  for (int i = 0; i < 8; i++) key |= uint64_t{p[1 + i]} << (8 * i);
  uint64_t filler = 0;
  const size_t filler_header = ParseVarInt(p + 10, p + n, &filler, 3);
  if (filler_header == 0) return false;
  const size_t pos = 10 + filler_header;
  if (pos + filler + 5 != n) return false;
  uint32_t sum = 0;
  for (int i = 0; i < 4; i++) sum |= uint32_t{p[n - 4 + i]} << (8 * i);
  if (sum != Fnv1a(p, n - 5)) return false;
  *producer = static_cast<uint16_t>(key >> 48);
  *writer = static_cast<uint16_t>(key >> 32);
  *serial = static_cast<uint32_t>(key);
  for (size_t i = 0; i < filler; i++) {
    if (p[pos + i] != static_cast<uint8_t>((*serial * 7 + i) & 0xff)) return false;
  }
  return true;
}

HarnessResult RunBufferScript(const uint8_t* data, size_t size, const HarnessOptions& options) {
  return Harness(data, size, options).Run();
}

}  // namespace ringside::buffer::testing
