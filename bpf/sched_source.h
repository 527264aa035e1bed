#ifndef RINGSIDE_BPF_SCHED_SOURCE_H_
#define RINGSIDE_BPF_SCHED_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sched;
struct ring_buffer;

namespace ringside::bpf {

// Loads and attaches bpf/sched.bpf.c (tp_btf/sched_switch) and reads its
// per-CPU ring buffers. Records are the structs of bpf/sched_events.h.
//
// Everything is detached and closed on destruction, so a test that fails
// half-way leaves no program attached. Not thread-safe: one thread polls.
class SchedSource {
 public:
  struct Options {
    size_t ring_size_per_cpu = 1 << 20;  // Bytes; rounded up to a power of two pages.
  };
  // Called for each record with the CPU whose ring it came from.
  using RecordCallback = std::function<void(uint32_t cpu, const void* record, size_t size)>;

  // Opens and loads the programs. Errors say what to do: kPermissionDenied
  // naming CAP_BPF/CAP_PERFMON, kUnavailable for a kernel without BTF,
  // kInvalidArgument with the verifier's log for a rejected program.
  static absl::StatusOr<std::unique_ptr<SchedSource>> Load(Options options);
  ~SchedSource();
  SchedSource(const SchedSource&) = delete;
  SchedSource& operator=(const SchedSource&) = delete;

  absl::Status Attach();
  void Detach();

  // Waits up to `timeout_ms` for records and consumes everything available,
  // calling `callback` per record. Returns the number of records.
  absl::StatusOr<int> Poll(int timeout_ms, const RecordCallback& callback);

  // Reserve failures of an event type, summed over CPUs.
  uint64_t drops(uint32_t event_type) const;
  int num_cpus() const { return num_cpus_; }

 private:
  SchedSource() = default;
  static int OnRecord(void* ctx, void* data, size_t size);

  ::sched* skel_ = nullptr;
  ::ring_buffer* rings_ = nullptr;
  std::vector<int> ring_fds_;
  int num_cpus_ = 0;
  struct RingContext {
    SchedSource* self;
    uint32_t cpu;
  };
  std::vector<std::unique_ptr<RingContext>> contexts_;
  const RecordCallback* callback_ = nullptr;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_SCHED_SOURCE_H_
