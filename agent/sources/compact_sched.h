#ifndef RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_
#define RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/writer/trace_writer.h"
#include "ringside/trace/ftrace_event_bundle.pb.h"

namespace ringside::agent {

// The intern table of one compact_sched bundle: each comm once, by index.
// A bundle holds few distinct comms, so a linear scan beats hashing, and
// the strings' capacity is kept from bundle to bundle (no allocation once
// warm).
class CommInterner {
 public:
  void Clear() { count_ = 0; }

  uint32_t Intern(absl::string_view comm) {
    for (size_t i = 0; i < count_; i++) {
      if (table_[i] == comm) return static_cast<uint32_t>(i);
    }
    if (count_ == table_.size()) table_.emplace_back();
    table_[count_].assign(comm.data(), comm.size());
    return static_cast<uint32_t>(count_++);
  }

  size_t size() const { return count_; }
  const std::string& operator[](size_t i) const { return table_[i]; }

 private:
  std::vector<std::string> table_;
  size_t count_ = 0;
};

// The columns of one bundle's compact_sched (Perfetto's compact encoding of
// sched_switch and sched_waking: one packed array per field, timestamps as
// deltas, comms by index into the intern table), kept from bundle to bundle
// so that no bundle allocates once warm. Both bundle writers fill it.
class CompactSchedColumns {
 public:
  void Clear() {
    switch_ts_.clear();
    switch_prev_state_.clear();
    switch_next_pid_.clear();
    switch_next_prio_.clear();
    switch_comm_.clear();
    waking_ts_.clear();
    waking_pid_.clear();
    waking_target_cpu_.clear();
    waking_prio_.clear();
    waking_comm_.clear();
    interned_.Clear();
    last_switch_ts_ = last_waking_ts_ = 0;
  }

  void AddSwitch(uint64_t ts, int64_t prev_state, int32_t next_pid, int32_t next_prio,
                 absl::string_view next_comm) {
    switch_ts_.push_back(ts - last_switch_ts_);
    last_switch_ts_ = ts;
    switch_prev_state_.push_back(prev_state);
    switch_next_pid_.push_back(next_pid);
    switch_next_prio_.push_back(next_prio);
    switch_comm_.push_back(interned_.Intern(next_comm));
  }

  void AddWaking(uint64_t ts, int32_t pid, int32_t target_cpu, int32_t prio,
                 absl::string_view comm) {
    waking_ts_.push_back(ts - last_waking_ts_);
    last_waking_ts_ = ts;
    waking_pid_.push_back(pid);
    waking_target_cpu_.push_back(target_cpu);
    waking_prio_.push_back(prio);
    waking_comm_.push_back(interned_.Intern(comm));
  }

  // Appends the compact_sched field to `bundle`, if any column has rows.
  void AppendTo(ProtoMessage* bundle) const {
    using CompactSched = trace::FtraceEventBundle::CompactSched;
    if (switch_ts_.empty() && waking_ts_.empty()) return;
    ProtoMessage* compact = bundle->BeginNested(trace::FtraceEventBundle::kCompactSchedFieldNumber);
    for (size_t i = 0; i < interned_.size(); i++) {
      compact->AppendString(CompactSched::kInternTableFieldNumber, interned_[i]);
    }
    if (size_t n = switch_ts_.size(); n > 0) {
      compact->AppendPackedVarInts(CompactSched::kSwitchTimestampFieldNumber, switch_ts_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kSwitchPrevStateFieldNumber,
                                   switch_prev_state_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kSwitchNextPidFieldNumber, switch_next_pid_.data(),
                                   n);
      compact->AppendPackedVarInts(CompactSched::kSwitchNextPrioFieldNumber,
                                   switch_next_prio_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kSwitchNextCommIndexFieldNumber,
                                   switch_comm_.data(), n);
    }
    if (size_t n = waking_ts_.size(); n > 0) {
      compact->AppendPackedVarInts(CompactSched::kWakingTimestampFieldNumber, waking_ts_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kWakingPidFieldNumber, waking_pid_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kWakingTargetCpuFieldNumber,
                                   waking_target_cpu_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kWakingPrioFieldNumber, waking_prio_.data(), n);
      compact->AppendPackedVarInts(CompactSched::kWakingCommIndexFieldNumber, waking_comm_.data(),
                                   n);
    }
    compact->EndNested();
  }

 private:
  std::vector<uint64_t> switch_ts_;
  std::vector<int64_t> switch_prev_state_;
  std::vector<int32_t> switch_next_pid_, switch_next_prio_;
  std::vector<uint32_t> switch_comm_;
  std::vector<uint64_t> waking_ts_;
  std::vector<int32_t> waking_pid_, waking_target_cpu_, waking_prio_;
  std::vector<uint32_t> waking_comm_;
  CommInterner interned_;
  uint64_t last_switch_ts_ = 0, last_waking_ts_ = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_
