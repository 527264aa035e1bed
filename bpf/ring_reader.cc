#include "bpf/ring_reader.h"

#include <linux/bpf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace ringside::bpf {
namespace {

uint64_t LoadAcquire(const uint64_t* p) {
  return std::atomic_ref<const uint64_t>(*p).load(std::memory_order_acquire);
}

uint32_t LoadAcquire32(const uint32_t* p) {
  return std::atomic_ref<const uint32_t>(*p).load(std::memory_order_acquire);
}

// Reads a byte of each page of a ring's data, so that the reader's first lap
// over the ring does not pay for each page's first access from user space
// on the event path. The kernel maps a ring's pages as we map it; but where
// the hypervisor shadows the guest's page tables, the first access to each
// page still costs a trip to it (~5 us on this project's 2-CPU VM, 2048 of
// them in a default ring of 8 MiB). Paid here once, while the sources
// start: the BPF reader's CPU in a recording of perf bench sched pipe fell
// by ~3 ms (tests/bench/thread_costs.sh). Elsewhere it costs next to nothing.
void TouchPages(const uint8_t* data, size_t size, size_t page_size) {
  uint8_t sum = 0;
  for (size_t offset = 0; offset < size; offset += page_size) {
    sum ^= *static_cast<const volatile uint8_t*>(data + offset);
  }
  static_cast<void>(sum);
}

}  // namespace

absl::Status RingReader::Init(size_t ring_size) {
  page_size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (ring_size == 0 || (ring_size & (ring_size - 1)) != 0 || ring_size % page_size_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring size ", ring_size, " is not a power-of-two number of pages"));
  }
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) return base::ErrnoStatus("epoll_create1");
  wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return base::ErrnoStatus("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = UINT32_MAX;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0)
    return base::ErrnoStatus("epoll_ctl");
  batch_.resize(kMaxBatch);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::Create(absl::Span<const int> fds,
                                                               size_t ring_size) {
  std::unique_ptr<RingReader> r(new RingReader());
  if (absl::Status s = r->Init(ring_size); !s.ok()) return s;
  epoll_event ev{};
  r->rings_.reserve(fds.size());
  for (size_t i = 0; i < fds.size(); i++) {
    Ring ring;
    // Page 0: the consumer position, ours to write. Then the producer
    // position page and the data. The kernel can map the data twice in a
    // row, so that no record wraps; we map it once, and copy the one record
    // a pass may find running over the end (ConsumeRing): mapped twice,
    // every page of the ring counts twice in our resident memory, a ring
    // per CPU.
    void* cons = mmap(nullptr, r->page_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
    if (cons == MAP_FAILED)
      return base::ErrnoStatus(absl::StrCat("mapping ring ", i, "'s consumer page"));
    ring.consumer_pos = static_cast<uint64_t*>(cons);
    ring.data_map_size = r->page_size_ + ring_size;
    void* prod = mmap(nullptr, ring.data_map_size, PROT_READ, MAP_SHARED, fds[i],
                      static_cast<off_t>(r->page_size_));
    if (prod == MAP_FAILED) {
      munmap(cons, r->page_size_);
      return base::ErrnoStatus(absl::StrCat("mapping ring ", i, "'s data"));
    }
    ring.producer_pos = static_cast<const uint64_t*>(prod);
    ring.data = static_cast<const uint8_t*>(prod) + r->page_size_;
    ring.mask = ring_size - 1;
    TouchPages(ring.data, ring_size, r->page_size_);
    r->rings_.push_back(ring);
    // Edge-triggered: only the kernel's wakeups (a ring a quarter full, see
    // rs_submit) end a wait. Level-triggered, a ring that always has a few
    // records (any busy CPU) would end every wait at once, and the reader
    // would spin on tiny batches.
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u32 = static_cast<uint32_t>(i);
    if (epoll_ctl(r->epoll_fd_.get(), EPOLL_CTL_ADD, fds[i], &ev) != 0) {
      return base::ErrnoStatus(absl::StrCat("adding ring ", i, " to epoll"));
    }
  }
  return r;
}

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::CreateForTesting(
    absl::Span<const RingMemoryForTesting> rings, size_t ring_size) {
  std::unique_ptr<RingReader> r(new RingReader());
  if (absl::Status s = r->Init(ring_size); !s.ok()) return s;
  for (const RingMemoryForTesting& memory : rings) {
    Ring ring;
    ring.consumer_pos = memory.consumer_pos;
    ring.producer_pos = memory.producer_pos;
    ring.data = memory.data;
    ring.mask = ring_size - 1;
    r->rings_.push_back(ring);
  }
  return r;
}

RingReader::~RingReader() {
  for (Ring& ring : rings_) {
    if (ring.data_map_size == 0) continue;
    munmap(ring.consumer_pos, page_size_);
    munmap(const_cast<uint64_t*>(ring.producer_pos), ring.data_map_size);
  }
}

uint64_t RingReader::ConsumeRing(uint32_t index, const BatchCallback& callback) {
  Ring& ring = rings_[index];
  // Locals: stores into the batch must not make the compiler reload these.
  const uint8_t* const data = ring.data;
  const uint64_t mask = ring.mask;
  RecordView* const batch = batch_.data();
  uint64_t consumed = 0;
  uint64_t cons = *ring.consumer_pos;  // Only we write it.
  for (;;) {
    const uint64_t prod = LoadAcquire(ring.producer_pos);
    if (cons >= prod) break;
    size_t n = 0;
    uint64_t pos = cons;
    // The kernel keeps prod - cons <= mask, and publishes a header only with
    // its whole record below prod. Past either, the bytes cannot be parsed.
    if (prod - cons > mask + 1) {
      corruptions_.fetch_add(1, std::memory_order_relaxed);
      pos = prod;
    }
    bool copied = false;  // The batch holds the record in wrapped_.
    while (pos < prod && n < kMaxBatch) {
      // Records are 8-byte aligned in a ring of a power of two pages: a
      // header never runs over the end, a payload can.
      const auto* hdr = reinterpret_cast<const uint32_t*>(data + (pos & mask));
      const uint32_t len = LoadAcquire32(hdr);
      if (len & BPF_RINGBUF_BUSY_BIT) break;  // Reserved, not yet submitted: wait for it.
      const uint32_t size = len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
      const uint64_t record_bytes =
          (static_cast<uint64_t>(size) + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t{7};
      if (record_bytes > prod - pos) {
        corruptions_.fetch_add(1, std::memory_order_relaxed);
        pos = prod;
        break;
      }
      const bool discarded = (len & BPF_RINGBUF_DISCARD_BIT) != 0;
      const uint64_t start = (pos + BPF_RINGBUF_HDR_SZ) & mask;
      if (start + size <= mask + 1) {
        batch[n] = RecordView{data + start, size};
      } else if (!discarded) {
        // Its bytes up to the end, then the rest from the start. The
        // records a batch spans are less than a ring apart, so no other
        // record of this batch runs over the end.
        if (copied) break;  // Cannot happen; the next batch gets it.
        const size_t head = mask + 1 - start;
        wrapped_.resize((size + 7) / 8);
        auto* out = reinterpret_cast<uint8_t*>(wrapped_.data());
        std::memcpy(out, data + start, head);
        std::memcpy(out + head, data, size - head);
        batch[n] = RecordView{out, size};
        copied = true;
      }
      n += !discarded;
      pos += record_bytes;
    }
    if (n > 0) callback(index, absl::MakeConstSpan(batch, n));
    consumed += n;
    if (pos == cons) break;  // Blocked on a busy record.
    cons = pos;
    std::atomic_ref<uint64_t>(*ring.consumer_pos).store(cons, std::memory_order_release);
  }
  return consumed;
}

uint64_t RingReader::Drain(const BatchCallback& callback) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < rings_.size(); i++) n += ConsumeRing(i, callback);
  return n;
}

absl::StatusOr<uint64_t> RingReader::Poll(int timeout_ms, const BatchCallback& callback) {
  epoll_event events[64];
  const int n = epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
  if (n < 0 && errno != EINTR) return base::ErrnoStatus("epoll_wait on the BPF rings");
  for (int i = 0; i < n; i++) {
    if (events[i].data.u32 == UINT32_MAX) {
      uint64_t v;
      while (read(wake_fd_.get(), &v, sizeof(v)) == sizeof(v)) {
      }
    }
  }
  // Every ring, not just the ready ones: the kernel only signals a ring
  // whose consumer had caught up, so a busy ring may not be in the list.
  return Drain(callback);
}

void RingReader::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof(one));
}

size_t RingReader::pending_bytes(size_t i) const {
  return static_cast<size_t>(LoadAcquire(rings_[i].producer_pos) - *rings_[i].consumer_pos);
}

}  // namespace ringside::bpf
