#ifndef RINGSIDE_AGENT_SOURCES_STACK_FIGURES_H_
#define RINGSIDE_AGENT_SOURCES_STACK_FIGURES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "agent/sources/data_source.h"
#include "agent/sources/stack_sample_writer.h"
#include "bpf/stack_maps.h"

namespace ringside::agent {

// What the stack writer counted and what it and the symbolizers hold, as
// the BPF reader last left them, for `status` on any thread. Each figure is
// an atomic of its own: a report may mix two publications, never tear one
// number.
//
// Thread-safe: one thread publishes, any reads.
class StackFigures {
 public:
  // The reader's thread: copies `stats`, what naming user frames met
  // (`user`), and the memory of the namer's symbol tables and caches
  // (`symbol_bytes`) and the writer's interning tables (`interning_bytes`).
  void Publish(const StackSampleWriter::Stats& stats, const UserSymbolizerStats& user,
               size_t symbol_bytes, size_t interning_bytes);

  // The figures last published, `recorded` set; with blocked stacks, how
  // `maps` takes them (sampled below `blocked_period_ns`, or at the switch)
  // and the shorter blocks it did not take.
  DataSource::StackReport Report(const bpf::StackMaps& maps, uint64_t blocked_period_ns) const;
  uint64_t stacks_unreadable() const { return stacks_unreadable_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> blocked_samples_{0};
  std::atomic<uint64_t> cpu_samples_{0};
  std::atomic<uint64_t> frames_named_{0};
  std::atomic<uint64_t> frames_unnamed_{0};
  std::atomic<uint64_t> callstacks_{0};
  std::atomic<uint64_t> interned_bytes_{0};
  std::atomic<uint64_t> generations_{0};
  std::atomic<uint64_t> remembered_stacks_{0};
  std::atomic<uint64_t> symbol_bytes_{0};
  std::atomic<uint64_t> interning_bytes_{0};
  std::atomic<uint64_t> stacks_unreadable_{0};
  std::atomic<uint64_t> user_frames_unmapped_{0};
  std::atomic<uint64_t> maps_reads_{0};
  std::atomic<uint64_t> maps_unreadable_{0};
  std::atomic<uint64_t> binaries_unreadable_{0};
  std::atomic<uint64_t> processes_evicted_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_STACK_FIGURES_H_
