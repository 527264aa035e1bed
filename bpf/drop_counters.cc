#include "bpf/drop_counters.h"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "bpf/common_events.h"
#include "bpf/load_errors.h"

namespace ringside::bpf {

absl::StatusOr<DropCounters> DropCounters::Create(int cpus) {
  if (cpus <= 0) return absl::InvalidArgumentError("drop counters for no CPU");
  DropCounters d;
  d.cpus_ = static_cast<uint32_t>(cpus);
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
  d.fd_.reset(bpf_map_create(BPF_MAP_TYPE_ARRAY, "rs_drops", sizeof(uint32_t),
                             sizeof(uint64_t) * RS_EV_MAX, d.cpus_, &opts));
  if (!d.fd_.valid()) return LoadError(errno, "creating the drop counters (an mmap-able array)");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = sizeof(uint64_t) * RS_EV_MAX * d.cpus_;
  d.mapped_bytes_ = (bytes + page - 1) / page * page;
  void* counts = mmap(nullptr, d.mapped_bytes_, PROT_READ, MAP_SHARED, d.fd_.get(), 0);
  if (counts == MAP_FAILED) {
    d.mapped_bytes_ = 0;
    return LoadError(errno, "mapping the drop counters");
  }
  d.counts_ = static_cast<const uint64_t*>(counts);
  return d;
}

DropCounters& DropCounters::operator=(DropCounters&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    counts_ = std::exchange(other.counts_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    cpus_ = std::exchange(other.cpus_, 0);
  }
  return *this;
}

void DropCounters::Unmap() {
  if (counts_ != nullptr) munmap(const_cast<uint64_t*>(counts_), mapped_bytes_);
  counts_ = nullptr;
  mapped_bytes_ = 0;
}

uint64_t DropCounters::count(uint32_t cpu, uint32_t event_type) const {
  if (counts_ == nullptr || cpu >= cpus_ || event_type >= RS_EV_MAX) return 0;
  return __atomic_load_n(&counts_[size_t{cpu} * RS_EV_MAX + event_type], __ATOMIC_RELAXED);
}

uint64_t DropCounters::of_cpu(uint32_t cpu) const {
  uint64_t n = 0;
  for (uint32_t type = 0; type < RS_EV_MAX; type++) n += count(cpu, type);
  return n;
}

std::vector<uint64_t> DropCounters::per_cpu(uint32_t event_type) const {
  std::vector<uint64_t> out(cpus_, 0);
  for (uint32_t cpu = 0; cpu < cpus_; cpu++) out[cpu] = count(cpu, event_type);
  return out;
}

}  // namespace ringside::bpf
