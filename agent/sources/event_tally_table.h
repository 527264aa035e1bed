#ifndef RINGSIDE_AGENT_SOURCES_EVENT_TALLY_TABLE_H_
#define RINGSIDE_AGENT_SOURCES_EVENT_TALLY_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "agent/sources/data_source.h"

namespace ringside::agent {

// The events a source wrote into packets, per CPU and kind (the source's own
// numbering), each counted as committed or as lost with its packet for want
// of a chunk: what DataSource::EventTallies() reports, for the session's
// losses in events. Threading: one thread adds; any thread may read.
class EventTallyTable {
 public:
  EventTallyTable(uint32_t num_cpus, uint32_t num_kinds);

  // Adds one packet's events of `cpu`: counts[kind] of each kind, all
  // committed or all `dropped`. A CPU out of range is not counted.
  // REQUIRES: counts.size() == num_kinds.
  void AddPacket(uint32_t cpu, absl::Span<const uint64_t> counts, bool dropped);

  // What a kind is reported as: its FtraceEvent field and name.
  struct KindName {
    uint32_t field;
    const char* name;
  };
  // The non-zero tallies, by CPU, then kind.
  std::vector<DataSource::EventTally> Collect(
      absl::FunctionRef<KindName(uint32_t kind)> name_of) const;

 private:
  uint32_t num_cpus_;
  uint32_t num_kinds_;
  // By (cpu * num_kinds + kind) * 2 + (1 if dropped, else 0).
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_EVENT_TALLY_TABLE_H_
