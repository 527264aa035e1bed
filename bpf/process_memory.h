#ifndef RINGSIDE_BPF_PROCESS_MEMORY_H_
#define RINGSIDE_BPF_PROCESS_MEMORY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct bpf_link;
struct rs_process_memory;

namespace ringside::bpf {

// The memory of every process on the machine, in one read: a BPF task
// iterator (bpf/process_memory.bpf.c) instead of a listing of /proc and one
// statm read per process: linux.process_stats's sample took 150 us
// of CPU against 573 us beside 300 processes on a 2-CPU VM, 733 against
// 4238 beside 2000 (sys_stats_benchmark). Loading it costs ~15 ms of CPU
// once (libbpf reads the kernel's BTF). Needs that BTF and iter/task (5.8),
// and the privilege to load BPF programs; a pass, once loaded, needs
// nothing more (on kernels before 6.5 with unprivileged_bpf_disabled,
// CAP_BPF, which the agent keeps there).
//
// The tgids are the kernel's (the init PID namespace's): only a reader
// whose /proc numbers tasks the same way should use them.
class ProcessMemory {
 public:
  // In pages, as the kernel counts them; /proc/PID/status shows each in
  // kB (VmRSS: the three resident kinds; VmHWM: the larger of hiwater_rss
  // and VmRSS).
  struct Process {
    int32_t tgid = 0;
    int32_t oom_score_adj = 0;
    uint64_t resident_pages = 0;  // As /proc/PID/statm's second field.
    uint64_t file_pages = 0;      // RssFile
    uint64_t anon_pages = 0;      // RssAnon
    uint64_t shmem_pages = 0;     // RssShmem
    uint64_t swap_entries = 0;    // VmSwap
    uint64_t total_vm = 0;        // VmSize
    uint64_t locked_vm = 0;       // VmLck
    uint64_t hiwater_rss = 0;     // The peak as last recorded.
  };

  // Loads and attaches the iterator; the error names why it cannot (no
  // BTF, a kernel without task iterators, the verifier, a privilege).
  static absl::StatusOr<std::unique_ptr<ProcessMemory>> Load();
  ~ProcessMemory();
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  // One pass: each process with an address space (a thread-group leader
  // with an mm; kernel threads have none) into `out`, which is replaced.
  absl::Status Read(std::vector<Process>* out);

 private:
  ProcessMemory() = default;

  rs_process_memory* skel_ = nullptr;
  bpf_link* link_ = nullptr;
  std::vector<uint8_t> bytes_;  // A pass's output, kept for its capacity.
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_PROCESS_MEMORY_H_
