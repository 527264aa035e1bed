#ifndef RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_
#define RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
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
  // A task's comm as the kernel keeps it (TASK_COMM_LEN).
  static constexpr size_t kCommBytes = 16;

  void Clear() {
    count_ = 0;
    last_ = 0;
  }

  uint32_t Intern(absl::string_view comm) {
    for (size_t i = 0; i < count_; i++) {
      if (entries_[i].text == comm) return static_cast<uint32_t>(i);
    }
    return Add(comm, nullptr);
  }

  // A comm as its record holds it, 16 bytes up to a NUL (or none): compared
  // whole, as two words, with the last one found first, so that the usual
  // case costs no call; the string up to the NUL is taken only when new.
  // Bytes after the NUL take part (older kernels leave them unpadded), so
  // one name may get two entries: each index still names it.
  uint32_t Intern(const char (&comm)[kCommBytes]) {
    uint64_t key[2];
    std::memcpy(key, comm, kCommBytes);
    if (last_ < count_ && entries_[last_].Is(key)) return last_;
    for (size_t i = 0; i < count_; i++) {
      if (entries_[i].Is(key)) return last_ = static_cast<uint32_t>(i);
    }
    return last_ = Add(absl::string_view(comm, strnlen(comm, kCommBytes)), key);
  }

  size_t size() const { return count_; }
  const std::string& operator[](size_t i) const { return entries_[i].text; }

 private:
  struct Entry {
    std::string text;
    uint64_t key[2] = {0, 0};  // The record's 16 bytes, when `keyed`.
    bool keyed = false;
    bool Is(const uint64_t (&k)[2]) const {
      return keyed && ((key[0] ^ k[0]) | (key[1] ^ k[1])) == 0;
    }
  };

  uint32_t Add(absl::string_view comm, const uint64_t* key) {
    if (count_ == entries_.size()) entries_.emplace_back();
    Entry& e = entries_[count_];
    e.text.assign(comm.data(), comm.size());
    e.keyed = key != nullptr;
    if (key != nullptr) std::memcpy(e.key, key, sizeof(e.key));
    return static_cast<uint32_t>(count_++);
  }

  std::vector<Entry> entries_;
  size_t count_ = 0;
  uint32_t last_ = 0;
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

  // `Comm`: a string_view, or a record's 16-byte comm array.
  template <typename Comm>
  void AddSwitch(uint64_t ts, int64_t prev_state, int32_t next_pid, int32_t next_prio,
                 const Comm& next_comm) {
    switch_ts_.push_back(ts - last_switch_ts_);
    last_switch_ts_ = ts;
    switch_prev_state_.push_back(prev_state);
    switch_next_pid_.push_back(next_pid);
    switch_next_prio_.push_back(next_prio);
    switch_comm_.push_back(interned_.Intern(next_comm));
  }

  template <typename Comm>
  void AddWaking(uint64_t ts, int32_t pid, int32_t target_cpu, int32_t prio, const Comm& comm) {
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
