#ifndef RINGSIDE_BPF_KERNEL_TRACEPOINTS_H_
#define RINGSIDE_BPF_KERNEL_TRACEPOINTS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::bpf {

class BtfFile;

// What a kernel's BTF says about its tracepoints, the parts the loader picks
// each program's flavour by: whether a tracepoint exists, how many arguments
// its probe takes, and whether the first is a pointer. Read in one pass over
// the BTF's types, from the btf_trace_<name> typedefs (each a pointer to the
// probe's prototype, whose first parameter is the context), and kept as a
// table: the BTF itself (5 MB) is not held.
class KernelTracepoints {
 public:
  struct Probe {
    int num_args = 0;  // The context left out.
    bool first_arg_is_pointer = false;
  };

  // The running kernel's (/sys/kernel/btf/vmlinux), mapped or read and
  // scanned in place: libbpf reads it again to load the programs, and a
  // second parse of it was a tenth of the agent's start-up CPU. Through
  // libbpf when the scan fails (a kind of BTF type newer than this reader).
  static absl::StatusOr<KernelTracepoints> Running();
  // bpf_config.btf_path's, from the copy BtfFile read and checked.
  static absl::StatusOr<KernelTracepoints> FromBtfFile(const BtfFile& file);
  // Raw BTF in this machine's byte order, as the kernel exposes its own.
  // kInvalidArgument names what is malformed; a tracepoint whose types do
  // not resolve is left out.
  static absl::StatusOr<KernelTracepoints> FromRawBtf(absl::string_view btf_untrusted);

  bool Has(absl::string_view tracepoint) const { return probes_.contains(tracepoint); }
  // -1 when the kernel lacks it.
  int NumArgs(absl::string_view tracepoint) const {
    auto it = probes_.find(tracepoint);
    return it == probes_.end() ? -1 : it->second.num_args;
  }
  bool FirstArgIsPointer(absl::string_view tracepoint) const {
    auto it = probes_.find(tracepoint);
    return it != probes_.end() && it->second.first_arg_is_pointer;
  }
  // By tracepoint name ("sched_switch").
  const absl::flat_hash_map<std::string, Probe>& probes() const { return probes_; }

 private:
  absl::flat_hash_map<std::string, Probe> probes_;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_KERNEL_TRACEPOINTS_H_
