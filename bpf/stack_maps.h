#ifndef RINGSIDE_BPF_STACK_MAPS_H_
#define RINGSIDE_BPF_STACK_MAPS_H_

#include <cstdint>
#include <vector>

struct bpf_map;

namespace ringside::bpf {

// The maps of the blocked stacks the scheduling group records
// (bpf/stack_events.h, LoadedGroups::Request::Stacks), as user space reads
// them: the stacks by id, and what was lost.
class StackMaps {
 public:
  StackMaps() = default;  // Stacks off.
  // `stacks`: STACK_TRACE; `losses`: PERCPU_ARRAY by rs_stack_loss; both
  // the loaded object's, valid while it lives. `flags`: RS_STACKS_*.
  StackMaps(const bpf_map* stacks, const bpf_map* losses, uint32_t flags, int num_cpus);

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
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_STACK_MAPS_H_
