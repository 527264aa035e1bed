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
    return InternNotLast(comm, key);
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

  // Out of line, so that the compare above is inlined where a row is added.
  [[gnu::noinline]] uint32_t InternNotLast(const char (&comm)[kCommBytes],
                                           const uint64_t (&key)[2]) {
    for (size_t i = 0; i < count_; i++) {
      if (entries_[i].Is(key)) return last_ = static_cast<uint32_t>(i);
    }
    return last_ = Add(absl::string_view(comm, strnlen(comm, kCommBytes)), key);
  }

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
// so that no bundle allocates once warm. Both bundle writers fill it. The
// BPF reader adds a row per scheduling record, so a row is one struct
// written in place (a push_back per column was five checks for room and
// five vector pointers loaded again after each store); the columns are
// read out of the rows as they are written into the bundle.
class CompactSchedColumns {
 public:
  void Clear() {
    switches_.clear();
    wakings_.clear();
    interned_.Clear();
    last_switch_ts_ = last_waking_ts_ = 0;
  }

  // `Comm`: a string_view, or a record's 16-byte comm array.
  template <typename Comm>
  void AddSwitch(uint64_t ts, int64_t prev_state, int32_t next_pid, int32_t next_prio,
                 const Comm& next_comm) {
    switches_.push_back(
        {ts - last_switch_ts_, prev_state, next_pid, next_prio, interned_.Intern(next_comm)});
    last_switch_ts_ = ts;
  }

  template <typename Comm>
  void AddWaking(uint64_t ts, int32_t pid, int32_t target_cpu, int32_t prio, const Comm& comm) {
    wakings_.push_back({ts - last_waking_ts_, pid, target_cpu, prio, interned_.Intern(comm)});
    last_waking_ts_ = ts;
  }

  // Rows added since Clear().
  size_t switches() const { return switches_.size(); }
  size_t wakings() const { return wakings_.size(); }

  // Appends the compact_sched field to `bundle`, if any column has rows.
  void AppendTo(ProtoMessage* bundle) const {
    using CompactSched = trace::FtraceEventBundle::CompactSched;
    if (switches_.empty() && wakings_.empty()) return;
    ProtoMessage* compact = bundle->BeginNested(trace::FtraceEventBundle::kCompactSchedFieldNumber);
    for (size_t i = 0; i < interned_.size(); i++) {
      compact->AppendString(CompactSched::kInternTableFieldNumber, interned_[i]);
    }
    if (const size_t n = switches_.size(); n > 0) {
      const Switch* s = switches_.data();
      compact->AppendPackedVarInts(CompactSched::kSwitchTimestampFieldNumber, s, n,
                                   [](const Switch& r) { return r.ts_delta; });
      compact->AppendPackedVarInts(CompactSched::kSwitchPrevStateFieldNumber, s, n,
                                   [](const Switch& r) { return r.prev_state; });
      compact->AppendPackedVarInts(CompactSched::kSwitchNextPidFieldNumber, s, n,
                                   [](const Switch& r) { return r.next_pid; });
      compact->AppendPackedVarInts(CompactSched::kSwitchNextPrioFieldNumber, s, n,
                                   [](const Switch& r) { return r.next_prio; });
      compact->AppendPackedVarInts(CompactSched::kSwitchNextCommIndexFieldNumber, s, n,
                                   [](const Switch& r) { return r.comm; });
    }
    if (const size_t n = wakings_.size(); n > 0) {
      const Waking* w = wakings_.data();
      compact->AppendPackedVarInts(CompactSched::kWakingTimestampFieldNumber, w, n,
                                   [](const Waking& r) { return r.ts_delta; });
      compact->AppendPackedVarInts(CompactSched::kWakingPidFieldNumber, w, n,
                                   [](const Waking& r) { return r.pid; });
      compact->AppendPackedVarInts(CompactSched::kWakingTargetCpuFieldNumber, w, n,
                                   [](const Waking& r) { return r.target_cpu; });
      compact->AppendPackedVarInts(CompactSched::kWakingPrioFieldNumber, w, n,
                                   [](const Waking& r) { return r.prio; });
      compact->AppendPackedVarInts(CompactSched::kWakingCommIndexFieldNumber, w, n,
                                   [](const Waking& r) { return r.comm; });
    }
    compact->EndNested();
  }

 private:
  // A row of each kind: the values as written, comms as intern indexes.
  struct Switch {
    uint64_t ts_delta;
    int64_t prev_state;
    int32_t next_pid;
    int32_t next_prio;
    uint32_t comm;
  };
  struct Waking {
    uint64_t ts_delta;
    int32_t pid;
    int32_t target_cpu;
    int32_t prio;
    uint32_t comm;
  };

  std::vector<Switch> switches_;
  std::vector<Waking> wakings_;
  CommInterner interned_;
  uint64_t last_switch_ts_ = 0, last_waking_ts_ = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_COMPACT_SCHED_H_
