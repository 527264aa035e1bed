#ifndef RINGSIDE_BPF_DROP_COUNTERS_H_
#define RINGSIDE_BPF_DROP_COUNTERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace ringside::bpf {

// The records the rings refused, by CPU and event type: the `drops` map
// every program shares (bpf/rings.bpf.h), an mmap-able array (5.5+) that
// this maps, so that the reader reads it on every pass without a system
// call. Movable, not copyable; unmaps on destruction.
class DropCounters {
 public:
  DropCounters() = default;  // No counters: every count reads 0.
  // A new map of `cpus` entries (the possible CPUs), each the count of
  // every event type (RS_EV_MAX), mapped read-only.
  static absl::StatusOr<DropCounters> Create(int cpus);
  DropCounters(DropCounters&& other) noexcept { *this = std::move(other); }
  DropCounters& operator=(DropCounters&& other) noexcept;
  ~DropCounters() { Unmap(); }

  int fd() const { return fd_.get(); }
  // Records of `event_type` refused on `cpu`, atomically read: written by
  // that CPU's programs as we read, a moment's figure.
  uint64_t count(uint32_t cpu, uint32_t event_type) const;
  // Of every type on `cpu`.
  uint64_t of_cpu(uint32_t cpu) const;
  // Of a type, by CPU (index: CPU).
  std::vector<uint64_t> per_cpu(uint32_t event_type) const;

 private:
  void Unmap();

  base::ScopedFd fd_;
  const uint64_t* counts_ = nullptr;  // [CPU][type], the map's memory.
  size_t mapped_bytes_ = 0;
  uint32_t cpus_ = 0;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_DROP_COUNTERS_H_
