#ifndef RINGSIDE_BPF_STACK_MAPS_H_
#define RINGSIDE_BPF_STACK_MAPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bpf/cpu_sampler.h"
#include "bpf/stack_events.h"

struct bpf_link;
struct bpf_map;
struct bpf_program;

namespace ringside::bpf {

// The frames a stack record carries (bpf/stack_events.h), bounded by the
// record's size: innermost first.
struct StackFrames {
  absl::Span<const uint64_t> kernel;
  absl::Span<const uint64_t> user;
};
// `record_size`: the record's bytes (its header's size, which the decoder
// checked against what it read). Frames that would lie past it are cut.
StackFrames FramesOf(const rs_stack_blocked& r, size_t record_size);
StackFrames FramesOf(const rs_stack_cpu_sample& r, size_t record_size);

// What the scheduling group's stacks need of user space
// (LoadedGroups::Request::Stacks): the kprobe that takes blocked threads'
// stacks as they run again, on this kernel's finish_task_switch(); the perf
// events that sample the CPUs; and what was lost.
class StackMaps {
 public:
  StackMaps() = default;  // Stacks off.
  // `losses`: PERCPU_ARRAY by rs_stack_loss; `unsampled`: PERCPU_ARRAY by
  // rs_blocked_unsampled; both the loaded object's, valid while it lives.
  // `flags`: RS_STACKS_*. `resume_program`, when loaded (RS_STACKS_BLOCKED
  // on a kernel with kprobes), is attached here on `resume_function`, so
  // that a kernel that refuses it is known at load;
  // `sample_program`, when loaded (null: no CPU samples), runs `cpu_hz`
  // times a second on every CPU once Start() attaches it; its perf events
  // are opened here, for the same reason.
  StackMaps(const bpf_map* losses, const bpf_map* unsampled, uint32_t flags, int num_cpus,
            bpf_program* resume_program, std::string resume_function, bpf_program* sample_program,
            uint32_t cpu_hz);
  ~StackMaps();
  StackMaps(StackMaps&& other) noexcept;
  StackMaps& operator=(StackMaps&& other) noexcept;
  StackMaps(const StackMaps&) = delete;
  StackMaps& operator=(const StackMaps&) = delete;

  // CPU samples on (at attach) and off (at detach); the blocked threads'
  // kprobe back on after a Stop().
  absl::Status Start();
  void Stop();
  // The CPUs sampled now.
  size_t sampled_cpus() const { return sampler_ == nullptr ? 0 : sampler_->cpus(); }
  // Why CPU samples asked for are not taken: the kernel refused the perf
  // events; empty when they are, or were not asked for.
  const std::string& cpu_sampling_refused() const { return sampling_refused_; }
  // Why blocked threads' stacks asked for are not taken (no
  // finish_task_switch to probe, or the kernel refused the kprobe); empty
  // when they are, or were not asked for.
  const std::string& blocked_refused() const { return blocked_refused_; }
  // Records why blocked threads' stacks asked for are not taken, when the
  // loader left them out.
  void RefuseBlocked(std::string why) { blocked_refused_ = std::move(why); }
  // The function the kprobe is on ("finish_task_switch.isra.0", ...);
  // empty when blocked threads' stacks are taken at the switch (every
  // block, no sampling: a kernel without kprobes) or not at all.
  const std::string& resume_function() const { return resume_function_; }
  // Blocked threads' stacks are asked for and taken at the switch.
  bool blocked_at_switch() const {
    return (flags_ & RS_STACKS_BLOCKED) != 0 && resume_function_.empty();
  }

  // Stacks lost by kind (index: rs_stack_loss), then CPU. With the blocked
  // stacks refused (blocked_refused()), none is counted of their blocks.
  std::vector<std::vector<uint64_t>> losses_per_cpu() const;
  // Short blocks not sampled, over all CPUs: how many, and their ns.
  struct Unsampled {
    uint64_t blocks = 0;
    uint64_t ns = 0;
  };
  Unsampled unsampled() const;
  // RS_STACKS_*: 0 when no stack is recorded.
  uint32_t flags() const { return flags_; }

 private:
  absl::Status AttachResume();

  const bpf_map* losses_ = nullptr;
  const bpf_map* unsampled_ = nullptr;
  uint32_t flags_ = 0;
  int num_cpus_ = 0;
  bpf_program* resume_program_ = nullptr;
  std::string resume_function_;
  bpf_link* resume_link_ = nullptr;
  std::string blocked_refused_;
  bpf_program* sample_program_ = nullptr;
  std::unique_ptr<CpuSampler> sampler_;
  std::string sampling_refused_;
};

// The name of this kernel's finish_task_switch() when a kprobe can be put
// on it (the kernel has kprobes); empty when not.
std::string ProbeableResumeFunction();

// The name this kernel's finish_task_switch() has in `kallsyms` (a
// /proc/kallsyms text): the function itself or a clone the compiler made
// of it ("finish_task_switch.isra.0"); empty when there is none.
std::string FindResumeFunction(absl::string_view kallsyms);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_STACK_MAPS_H_
