#include "bpf/stack_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <utility>

#include "bpf/stack_events.h"

namespace ringside::bpf {

StackMaps::StackMaps(const bpf_map* stacks, const bpf_map* losses, uint32_t flags, int num_cpus,
                     bpf_program* sample_program, uint32_t cpu_hz)
    : stacks_(stacks), losses_(losses), flags_(flags), num_cpus_(num_cpus) {
  if (stacks_ == nullptr || losses_ == nullptr) flags_ = 0;
  if (flags_ == 0 || sample_program == nullptr || cpu_hz == 0) return;
  absl::StatusOr<std::unique_ptr<CpuSampler>> sampler = CpuSampler::Open(cpu_hz, num_cpus);
  if (!sampler.ok()) {
    sampling_refused_ = std::string(sampler.status().message());
    return;
  }
  sampler_ = std::move(*sampler);
  sample_program_ = sample_program;
}

absl::Status StackMaps::StartSampling() {
  return sampler_ == nullptr ? absl::OkStatus() : sampler_->Attach(sample_program_);
}

void StackMaps::StopSampling() {
  if (sampler_ != nullptr) sampler_->Detach();
}

bool StackMaps::Read(int32_t id, std::vector<uint64_t>* frames) const {
  frames->clear();
  if (id < 0 || flags_ == 0) return false;
  buffer_.resize(bpf_map__value_size(stacks_) / sizeof(uint64_t));
  const uint32_t key = static_cast<uint32_t>(id);
  if (bpf_map_lookup_elem(bpf_map__fd(stacks_), &key, buffer_.data()) != 0) return false;
  // The kernel zeroes the slots past the stack's last frame.
  for (uint64_t ip : buffer_) {
    if (ip == 0) break;
    frames->push_back(ip);
  }
  return true;
}

std::vector<std::vector<uint64_t>> StackMaps::losses_per_cpu() const {
  const size_t cpus = static_cast<size_t>(num_cpus_);
  std::vector<std::vector<uint64_t>> out(RS_STACK_LOSS_MAX, std::vector<uint64_t>(cpus, 0));
  if (flags_ == 0) return out;
  // A per-CPU value is one u64 per possible CPU.
  for (uint32_t kind = 0; kind < RS_STACK_LOSS_MAX; kind++) {
    if (bpf_map_lookup_elem(bpf_map__fd(losses_), &kind, out[kind].data()) != 0) {
      std::fill(out[kind].begin(), out[kind].end(), 0);
    }
  }
  return out;
}

}  // namespace ringside::bpf
