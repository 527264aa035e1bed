#ifndef RINGSIDE_BPF_RING_READER_H_
#define RINGSIDE_BPF_RING_READER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/scoped_fd.h"

namespace ringside::bpf {

// One record as it sits in a ring: valid until the batch callback returns.
struct RecordView {
  const void* data;
  uint32_t size;
};

// Consumes a set of BPF ring buffers (one per CPU) by mapping them
// directly: records are handed out in place (the rare one that runs over a
// ring's end, copied), in batches per ring, and the
// ring space is released when the batch callback returns. One epoll set
// covers every ring plus an eventfd, so a blocked Poll() can be woken from
// another thread.
//
// Not thread-safe except Wake(): one thread polls.
class RingReader {
 public:
  // Called with the records of one ring (`ring` = index into the fds given
  // to Create, which for our rings is the CPU), in the order reserved.
  using BatchCallback = std::function<void(uint32_t ring, absl::Span<const RecordView> records)>;

  // `fds` are BPF_MAP_TYPE_RINGBUF maps of `ring_size` bytes each. The
  // reader does not own them (they must outlive it).
  static absl::StatusOr<std::unique_ptr<RingReader>> Create(absl::Span<const int> fds,
                                                            size_t ring_size);

  // Ring memory laid out the way the kernel maps a BPF_MAP_TYPE_RINGBUF, for
  // tests that write the records by hand. `data` is `ring_size` bytes; the
  // reader reads none past them.
  struct RingMemoryForTesting {
    uint64_t* consumer_pos;
    const uint64_t* producer_pos;
    const uint8_t* data;
  };
  // A reader of `rings`, which it neither owns nor unmaps. Poll() wakes only
  // for Wake() (the memory has no fd to wait on) and drains as usual.
  static absl::StatusOr<std::unique_ptr<RingReader>> CreateForTesting(
      absl::Span<const RingMemoryForTesting> rings, size_t ring_size);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Waits up to `timeout_ms` (-1: forever, 0: not at all) until a ring has
  // data or Wake() is called, then consumes everything available in every
  // ring. Returns the number of records.
  absl::StatusOr<uint64_t> Poll(int timeout_ms, const BatchCallback& callback);
  // Consumes what is available without waiting.
  uint64_t Drain(const BatchCallback& callback);
  // Makes a Poll() in progress (or the next one) return at once.
  void Wake();

  // Bytes written but not yet consumed in ring `i`.
  size_t pending_bytes(size_t i) const;
  size_t num_rings() const { return rings_.size(); }
  // Times a ring's memory was found corrupt: a header whose record runs past
  // the data the producer published (or past the ring), or a producer more
  // than a ring ahead of us. The kernel writes neither, and no record after
  // one can be found, so each time the rest of that ring's pending data is
  // given up: the ring keeps working instead of staying full for good (the
  // kernel refuses every reservation while it looks full). Any thread may
  // read it (the data source reports it as a loss).
  uint64_t corruptions() const { return corruptions_.load(std::memory_order_relaxed); }

  // Most records handed to one callback; the ring space they hold is
  // released after each batch, so producers get room back while a long
  // drain is still running.
  static constexpr size_t kMaxBatch = 1024;

 private:
  struct Ring {
    uint64_t* consumer_pos = nullptr;        // Shared page we write.
    const uint64_t* producer_pos = nullptr;  // Read-only page the kernel writes.
    const uint8_t* data = nullptr;           // Mapped once: a record may run over the end.
    size_t mask = 0;
    size_t data_map_size = 0;  // 0: memory not mapped by us (ForTesting).
  };
  RingReader() = default;
  absl::Status Init(size_t ring_size);
  uint64_t ConsumeRing(uint32_t index, const BatchCallback& callback);

  std::vector<Ring> rings_;
  std::vector<RecordView> batch_;
  // The one record of a batch that runs over the ring's end, copied whole
  // (8-byte aligned, as records are in place).
  std::vector<uint64_t> wrapped_;
  base::ScopedFd epoll_fd_;
  base::ScopedFd wake_fd_;
  size_t page_size_ = 0;
  std::atomic<uint64_t> corruptions_{0};
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_RING_READER_H_
