// bpf::EventSource and bpf::ProcessMemory in a build made on a machine
// without BTF (see the Makefile): the programs could not be compiled, so
// loading them reports that, and callers fall back to what they can do
// without BPF.
#include "bpf/event_source.h"
#include "bpf/process_memory.h"

#include <unistd.h>

#include <cerrno>

namespace ringside::bpf {

absl::StatusOr<std::unique_ptr<EventSource>> EventSource::Load(const Options&) {
  return absl::UnavailableError(
      "this ringside was built without its BPF programs: the build machine's kernel had no BTF "
      "(/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF=y); rebuild on a kernel with BTF");
}

absl::StatusOr<std::unique_ptr<ProcessMemory>> ProcessMemory::Load() {
  return absl::UnavailableError("this ringside was built without its BPF programs");
}
ProcessMemory::~ProcessMemory() = default;
absl::Status ProcessMemory::Read(std::vector<Process>*) {
  return absl::UnavailableError("no BPF in this build");
}

// Never constructed: Load() above is the only way to make one (nor is a
// LoadedGroups, which only EventSource::Load() makes).
EventSource::~EventSource() = default;
LoadedGroups::~LoadedGroups() = default;
absl::Status EventSource::Attach() { return absl::UnavailableError("no BPF in this build"); }
void EventSource::Detach() {}
void EventSource::SetRecording(bool) {}
absl::Status EventSource::SetCgroupFilter(const std::vector<uint64_t>&) {
  return absl::UnavailableError("no BPF in this build");
}
uint64_t EventSource::Drain(const RingReader::BatchCallback&) { return 0; }
uint64_t EventSource::DrainBefore(uint64_t, const RingReader::BatchCallback&) { return 0; }
absl::StatusOr<uint64_t> EventSource::Poll(int, const RingReader::BatchCallback&) {
  return absl::UnavailableError("no BPF in this build");
}
void EventSource::FlushSchedBatches(uint64_t) {}
std::vector<uint64_t> EventSource::records_waiting(uint32_t) const { return {}; }
std::vector<uint64_t> EventSource::drops_per_cpu(uint32_t) const { return {}; }
uint64_t EventSource::drops(uint32_t) const { return 0; }
std::vector<std::vector<uint64_t>> EventSource::all_drops_per_cpu() const { return {}; }
std::vector<std::vector<uint64_t>> EventSource::all_seen_per_cpu() const { return {}; }
uint64_t EventSource::not_recorded(uint32_t) const { return 0; }
std::vector<EventSource::ProgramStats> EventSource::program_stats() const { return {}; }
int EventSource::EnableKernelStats() {
  errno = ENOSYS;
  return -1;
}

}  // namespace ringside::bpf
