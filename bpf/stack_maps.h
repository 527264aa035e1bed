#ifndef RINGSIDE_BPF_STACK_MAPS_H_
#define RINGSIDE_BPF_STACK_MAPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bpf/cpu_sampler.h"

struct bpf_map;
struct bpf_program;

namespace ringside::bpf {

// The stacks the scheduling group records (bpf/stack_events.h,
// LoadedGroups::Request::Stacks) as user space reads them: the stacks by
// id, and what was lost; and the perf events that sample the CPUs.
class StackMaps {
 public:
  StackMaps() = default;  // Stacks off.
  // `stacks`: STACK_TRACE; `losses`: PERCPU_ARRAY by rs_stack_loss; both
  // the loaded object's, valid while it lives. `flags`: RS_STACKS_*.
  // `sample_program`, when loaded (null: no CPU samples), runs `cpu_hz`
  // times a second on every CPU once StartSampling() attaches it; its perf
  // events are opened here, so that a refusal is known at load.
  StackMaps(const bpf_map* stacks, const bpf_map* losses, uint32_t flags, int num_cpus,
            bpf_program* sample_program, uint32_t cpu_hz);

  // CPU samples on (at attach) and off (at detach); nothing without them.
  absl::Status StartSampling();
  void StopSampling();
  // The CPUs sampled now.
  size_t sampled_cpus() const { return sampler_ == nullptr ? 0 : sampler_->cpus(); }
  // Why CPU samples asked for are not taken: the kernel refused the perf
  // events; empty when they are, or were not asked for.
  const std::string& cpu_sampling_refused() const { return sampling_refused_; }

  // The frames of stack `id` (from a RS_EV_STACK_BLOCKED record), innermost
  // first, into *frames; false when the map has no such id (stacks off, or
  // a bad id). An id names one stack as long as the map lives: ids are
  // never freed.
  bool Read(int32_t id, std::vector<uint64_t>* frames) const;
  // Stacks lost by kind (index: rs_stack_loss), then CPU.
  std::vector<std::vector<uint64_t>> losses_per_cpu() const;
  // RS_STACKS_*: 0 when no stack is recorded.
  uint32_t flags() const { return flags_; }

 private:
  const bpf_map* stacks_ = nullptr;
  const bpf_map* losses_ = nullptr;
  uint32_t flags_ = 0;
  int num_cpus_ = 0;
  mutable std::vector<uint64_t> buffer_;  // Read()'s map value.
  bpf_program* sample_program_ = nullptr;
  std::unique_ptr<CpuSampler> sampler_;
  std::string sampling_refused_;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_STACK_MAPS_H_
