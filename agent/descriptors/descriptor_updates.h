#ifndef RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_UPDATES_H_
#define RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_UPDATES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "buffer/durable_store.h"

namespace ringside::agent {

// The changes the descriptor tracker makes to the durable store's entries,
// queued in order until the buffer owner applies them (DescriptorTracker::
// ApplyTo). Not thread-safe: the tracker's lock guards it, and a batch
// taken out is applied outside that lock.
//
// The memory of a batch applied is the queue's again: the queue and the
// batch take turns in two blocks of up to kMaxKept updates (48 bytes each:
// at most 0.75 MiB kept in all). A queue grown from nothing after each of
// the owner's passes was 8% of the BPF reader's profile in hackbench and
// fork+exec (the moves of each growth, and fresh pages).
class DescriptorUpdates {
 public:
  using Kind = buffer::DurableStore::Kind;
  static constexpr size_t kMaxKept = 8192;

  struct Update {
    Kind kind;
    enum class Op : uint8_t { kPut, kPutEnded, kEnd } op;
    uint64_t id;
    std::string packet;  // A TracePacket's bytes (kEnd: none).
  };
  static_assert(sizeof(Kind) == 1, "kind and op share a word with padding");
  using Batch = std::vector<Update>;

  // The entry `id` of `kind` is `packet` from now on; `ended`: and its
  // task or interned entry has ended (DurableStore::PutEnded).
  void Put(Kind kind, uint64_t id, bool ended, std::string packet);
  // The entry's task or interned entry ended (DurableStore::MarkEnded).
  void End(Kind kind, uint64_t id);

  // What was queued since the last call, in order; the queue goes on in
  // the memory of the last batch given back.
  Batch Take();
  // Applies `batch` to `store` in order and empties it.
  static void Apply(buffer::DurableStore* store, Batch* batch);
  // An applied (empty) batch's memory, for the queue after the next Take().
  void GiveBack(Batch batch);

  size_t size() const { return queue_.size(); }

 private:
  Batch queue_;
  Batch spare_;  // Empty; its capacity at most kMaxKept.
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_UPDATES_H_
