#ifndef RINGSIDE_BPF_CPU_SAMPLER_H_
#define RINGSIDE_BPF_CPU_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

struct bpf_link;
struct bpf_program;

namespace ringside::bpf {

// A cpu-clock perf event on every online CPU, firing `hz` times a second,
// each running a BPF program (sched.bpf.c's sample_cpu_stack): software
// timers, so it works in VMs without a PMU, as perf's cpu-clock does. The
// events are opened (disabled) when the programs load, so that what the
// kernel refuses is known then, and run once attached. Everything is
// detached and closed on destruction. A CPU brought online later is not
// sampled.
class CpuSampler {
 public:
  // Fails naming perf_event_open and what it needs (CAP_PERFMON, or
  // kernel.perf_event_paranoid) when a CPU that is online cannot be
  // sampled.
  static absl::StatusOr<std::unique_ptr<CpuSampler>> Open(uint32_t hz, int num_cpus);
  ~CpuSampler();
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  // Runs `program` on every event from now on.
  absl::Status Attach(bpf_program* program);
  // Stops it (the events stay open).
  void Detach();

  // The CPUs sampled while attached.
  size_t cpus() const { return links_.size(); }

 private:
  CpuSampler() = default;
  std::vector<base::ScopedFd> events_;
  std::vector<bpf_link*> links_;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_CPU_SAMPLER_H_
