#ifndef RINGSIDE_BUFFER_INTERNAL_TRACE_BUFFER_MEMORY_H_
#define RINGSIDE_BUFFER_INTERNAL_TRACE_BUFFER_MEMORY_H_

// TraceBuffer's memory as its three units share it (trace_buffer.cc: the
// writes; trace_buffer_read.cc: the sequence reader; trace_buffer_clone.cc:
// the copy-on-write clone): the header of a stored chunk, its local flags,
// the mapping, and the accessors every read and write of the memory goes
// through (inline: they are on every path). Only those three files include
// it. docs/design/trace-buffer.md has the layout.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "buffer/trace_buffer.h"

namespace ringside::buffer {

// Local TBChunk flags, above the three ABI flags.
inline constexpr uint8_t kIncomplete = 1 << 3;   // Scraped: the last fragment is not readable.
inline constexpr uint8_t kCorrupted = 1 << 4;    // Fragments were dropped as malformed: report it.
inline constexpr uint8_t kErased = 1 << 5;       // Consumed or overwritten: dead space.
inline constexpr uint8_t kSeen = 1 << 6;         // The ChunkID gap check was done.
inline constexpr uint8_t kLostInErase = 1 << 7;  // Unread bytes were erased by an overwrite.

// TBChunk::history bits: what happened to a chunk that its flags no longer say.
inline constexpr uint8_t kReadOut = 1;  // kErased because a read consumed all of it.

// The low bits of a record's first word (sizes are multiples of 4).
inline constexpr uint32_t kPaddingBit = 1;
// Padding that only marks the unused tail of the newest chunk, given back at
// once to the next write: not counted in the padding stats.
inline constexpr uint32_t kTransientBit = 2;
inline constexpr uint32_t kSizeMask = ~uint32_t{3};
inline constexpr uint32_t kAlignment = 4;

inline uint32_t AlignUp(uint32_t n) { return (n + kAlignment - 1) & ~(kAlignment - 1); }

// True if ChunkID `a` comes after `b`, modulo 2^32.
inline bool IsAfter(ChunkID a, ChunkID b) { return static_cast<int32_t>(a - b) > 0; }

// The header of every chunk stored in the buffer, followed by its payload.
// A padding record is just the first word, with kPaddingBit set; it can be as
// small as 4 bytes, so only that word may be read before checking it.
struct TraceBuffer::TBChunk {
  uint32_t size_and_padding;  // Outer size (header + reserved payload), | kPaddingBit.
  ChunkID chunk_id;
  ProducerID producer_id;
  WriterID writer_id;
  uint16_t payload_size;          // Readable fragment bytes.
  uint16_t payload_consumed;      // Bytes read (or erased) so far; a fragment boundary.
  uint16_t last_fragment_offset;  // Start of the last readable fragment (for patches).
  uint8_t flags;                  // ABI flags | local flags.
  uint8_t history;                // kReadOut.

  uint32_t outer_size() const { return size_and_padding & kSizeMask; }
  uint8_t* payload() { return reinterpret_cast<uint8_t*>(this) + sizeof(TBChunk); }
  const uint8_t* payload() const {
    return reinterpret_cast<const uint8_t*>(this) + sizeof(TBChunk);
  }
};

inline constexpr uint32_t kTBChunkHeaderSize = 20;

// The kernel's page size: the unit of mappings and their protection (4
// KiB; 16 or 64 KiB on some arm64 kernels).
inline size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The buffer's memory. A clone in progress shares its mapping with the
// buffer it is cloned from, which copies into it.
struct TraceBuffer::Mapping {
  uint8_t* memory = nullptr;
  size_t size = 0;
  size_t mapped = 0;  // `size` rounded up to the kernel's pages.
  // The whole reservation: `mapped` bytes between guard pages, and what
  // aligning them took.
  void* reserved = nullptr;
  size_t reserved_size = 0;
  // False while a clone's bytes are still being copied in. Stored with
  // release once the last byte is in; a reader on another thread loads it
  // with acquire before touching the memory.
  std::atomic<bool> complete{true};

  ~Mapping() {
    if (reserved != nullptr) munmap(reserved, reserved_size);
  }
  // Maps `size` bytes (a multiple of 4 KiB) between guard pages, or returns
  // nullptr. On a kernel of larger pages the last one's rest is mapped too,
  // unused: the buffer's size is the same on every kernel.
  //
  // A buffer of 2 MiB or more starts on a 2 MiB boundary, so that
  // PopulateMemory can give it transparent huge pages.
  static std::shared_ptr<Mapping> Map(size_t size) {
    // Inaccessible guard pages on both sides turn any access outside the
    // buffer into a fault instead of a silent read of other memory.
    const size_t page = PageSize();
    const size_t mapped = (size + page - 1) / page * page;
    const size_t align = mapped >= kHugePageSize && page < kHugePageSize ? kHugePageSize : page;
    const size_t reserved_size = mapped + 2 * page + (align - page);
    void* base =
        mmap(nullptr, reserved_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    const uintptr_t first = reinterpret_cast<uintptr_t>(base) + page;
    uint8_t* memory = reinterpret_cast<uint8_t*>((first + align - 1) / align * align);
    if (mprotect(memory, mapped, PROT_READ | PROT_WRITE) != 0) {
      munmap(base, reserved_size);
      return nullptr;
    }
    auto m = std::make_shared<Mapping>();
    m->memory = memory;
    m->size = size;
    m->mapped = mapped;
    m->reserved = base;
    m->reserved_size = reserved_size;
    return m;
  }

  // A PMD-sized transparent huge page on x86-64 and on arm64 of 4 KiB pages
  // (a kernel of 16 or 64 KiB pages has larger ones: this alignment does not
  // reach them, and the buffer keeps its pages there).
  static constexpr size_t kHugePageSize = 2 << 20;
};

// Faults in [memory + start, memory + end) (page-aligned), then wraps to
// [memory, memory + start): writable pages of their own, mapped before any
// write needs them. In slices: the kernel holds the process's memory map
// lock while it populates, and a page fault of another thread waits behind
// a long hold. It asks the kernel for pages and touches no byte, so it may
// run beside writes to the same memory. MADV_POPULATE_WRITE (5.14); on an
// older kernel, mlock then munlock of each slice, which faults the pages in
// the same way (it needs CAP_IPC_LOCK or room under RLIMIT_MEMLOCK). False
// when neither could populate all of it.
//
// Each slice asks for transparent huge pages first (MADV_HUGEPAGE: where
// THP is in `madvise` mode, as on this project's VM, only memory that asks
// gets them): one fault where 4 KiB pages take 512, and where the first
// access to a page is dear even once mapped (a VM whose hypervisor shadows
// the guest's page tables, ~5 us a page), a fresh buffer's first pass 6
// times faster and a clone 15 times (docs/design/trace-buffer.md). Only
// here, on the thread that populates, and not at Map(): in a huge page's
// range, a fault may compact memory before it returns, which a writer
// faulting under its lock must not wait for. The slices are whole huge
// pages where the memory is aligned (Mapping::Map); without THP nothing
// changes.
inline bool PopulateMemory(uint8_t* memory, size_t start, size_t end) {
  constexpr size_t kSlice = 4 << 20;
  start = std::min(start / kSlice * kSlice, end);
  for (size_t done = 0, offset = start; done < end;) {
    if (offset >= end) offset = 0;
    const size_t n = std::min(kSlice, end - offset);
    bool populated = false;
#ifdef MADV_HUGEPAGE
    madvise(memory + offset, n, MADV_HUGEPAGE);  // EINVAL without THP: no matter.
#endif
#ifdef MADV_POPULATE_WRITE
    populated = madvise(memory + offset, n, MADV_POPULATE_WRITE) == 0;
#endif
    if (!populated) {
      if (mlock(memory + offset, n) != 0) return false;
      munlock(memory + offset, n);
    }
    offset += n;
    done += n;
  }
  return true;
}

inline const TraceBuffer::TBChunk* TraceBuffer::ChunkAt(uint32_t offset) const {
  return reinterpret_cast<const TBChunk*>(memory_ + offset);
}

inline uint32_t TraceBuffer::FirstWordAt(uint32_t offset) const {
  uint32_t word;
  std::memcpy(&word, memory_ + offset, sizeof(word));
  return word;
}

inline TraceBuffer::TBChunk* TraceBuffer::MutableChunkAt(uint32_t offset) {
  PreserveForClone(offset, std::max(FirstWordAt(offset) & kSizeMask, kTBChunkHeaderSize));
  return reinterpret_cast<TBChunk*>(memory_ + offset);
}

inline uint8_t* TraceBuffer::WritableBytes(uint32_t offset, uint32_t size) {
  PreserveForClone(offset, size);
  return memory_ + offset;
}

inline void TraceBuffer::AddLoss(SequenceState& seq, uint32_t reasons) {
  seq.pending_loss |= reasons | kDataLossPresent;
}

}  // namespace ringside::buffer

#endif  // RINGSIDE_BUFFER_INTERNAL_TRACE_BUFFER_MEMORY_H_
