#include "agent/sources/stack_figures.h"

namespace ringside::agent {
namespace {

void Set(std::atomic<uint64_t>& to, uint64_t v) { to.store(v, std::memory_order_relaxed); }
uint64_t Get(const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); }

}  // namespace

void StackFigures::Publish(const StackSampleWriter::Stats& stats, const UserSymbolizerStats& user,
                           size_t symbol_bytes, size_t interning_bytes) {
  Set(blocked_samples_, stats.blocked_samples);
  Set(cpu_samples_, stats.cpu_samples);
  Set(frames_named_, stats.frames_named);
  Set(frames_unnamed_, stats.frames_unnamed);
  Set(callstacks_, stats.callstacks);
  Set(interned_bytes_, stats.interned_bytes);
  Set(generations_, stats.generations);
  Set(remembered_stacks_, stats.remembered_stacks);
  Set(symbol_bytes_, symbol_bytes);
  Set(interning_bytes_, interning_bytes);
  Set(stacks_unreadable_, stats.stacks_unreadable);
  Set(user_frames_unmapped_, user.frames_unmapped);
  Set(maps_reads_, user.maps_reads);
  Set(maps_unreadable_, user.maps_unreadable);
  Set(binaries_unreadable_, user.mappings_unreadable);
  Set(processes_evicted_, user.processes_evicted);
}

DataSource::StackReport StackFigures::Report(const bpf::StackMaps& maps,
                                             uint64_t blocked_period_ns) const {
  DataSource::StackReport r;
  r.recorded = true;
  r.blocked_samples = Get(blocked_samples_);
  r.cpu_samples = Get(cpu_samples_);
  r.frames_named = Get(frames_named_);
  r.frames_unnamed = Get(frames_unnamed_);
  r.callstacks = Get(callstacks_);
  r.interned_bytes = Get(interned_bytes_);
  r.generations = Get(generations_);
  r.remembered_stacks = Get(remembered_stacks_);
  r.symbol_bytes = Get(symbol_bytes_);
  r.interning_bytes = Get(interning_bytes_);
  r.user_frames_unmapped = Get(user_frames_unmapped_);
  r.maps_reads = Get(maps_reads_);
  r.maps_unreadable = Get(maps_unreadable_);
  r.binaries_unreadable = Get(binaries_unreadable_);
  r.processes_evicted = Get(processes_evicted_);
  if ((maps.flags() & RS_STACKS_BLOCKED) != 0) {
    r.blocked_at_switch = maps.blocked_at_switch();
    r.blocked_period_ns = r.blocked_at_switch ? 0 : blocked_period_ns;
    const bpf::StackMaps::Unsampled u = maps.unsampled();
    r.blocked_unsampled = u.blocks;
    r.blocked_unsampled_ns = u.ns;
  }
  return r;
}

}  // namespace ringside::agent
