#include "agent/sources/event_tally_table.h"

namespace ringside::agent {

EventTallyTable::EventTallyTable(uint32_t num_cpus, uint32_t num_kinds)
    : num_cpus_(num_cpus),
      num_kinds_(num_kinds),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(size_t{num_cpus} * num_kinds * 2)) {}

void EventTallyTable::AddPacket(uint32_t cpu, absl::Span<const uint64_t> counts, bool dropped) {
  if (cpu >= num_cpus_) return;
  for (uint32_t kind = 0; kind < num_kinds_ && kind < counts.size(); kind++) {
    if (counts[kind] == 0) continue;
    counts_[(size_t{cpu} * num_kinds_ + kind) * 2 + (dropped ? 1 : 0)].fetch_add(
        counts[kind], std::memory_order_relaxed);
  }
}

std::vector<DataSource::EventTally> EventTallyTable::Collect(
    absl::FunctionRef<KindName(uint32_t kind)> name_of) const {
  std::vector<DataSource::EventTally> out;
  for (uint32_t cpu = 0; cpu < num_cpus_; cpu++) {
    for (uint32_t kind = 0; kind < num_kinds_; kind++) {
      const size_t i = (size_t{cpu} * num_kinds_ + kind) * 2;
      const uint64_t committed = counts_[i].load(std::memory_order_relaxed);
      const uint64_t dropped = counts_[i + 1].load(std::memory_order_relaxed);
      if (committed == 0 && dropped == 0) continue;
      const KindName name = name_of(kind);
      out.push_back(DataSource::EventTally{cpu, name.field, name.name, committed, dropped});
    }
  }
  return out;
}

}  // namespace ringside::agent
