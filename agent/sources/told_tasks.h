#ifndef RINGSIDE_AGENT_SOURCES_TOLD_TASKS_H_
#define RINGSIDE_AGENT_SOURCES_TOLD_TASKS_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_set.h"

namespace ringside::agent {

// The task ids a source has told the descriptor tracker of (BpfDataSource):
// a set, with a front that answers the common question, "told already?",
// for the same few tasks a scheduling record names again and again, with a
// load and a compare. Three set lookups a switch were 8% of the BPF
// reader's profile samples beside a ping-pong. Not thread-safe.
class ToldTasks {
 public:
  // Adds `tid` (> 0); true if it was not in the set.
  bool Insert(int32_t tid) {
    if (recent_[Slot(tid)] == tid) return false;
    return InsertNotRecent(tid);
  }
  void Erase(int32_t tid) {
    int32_t& recent = recent_[Slot(tid)];
    if (recent == tid) recent = 0;
    set_.erase(tid);
  }
  void Clear() {
    recent_.fill(0);
    set_.clear();
  }
  size_t size() const { return set_.size(); }

 private:
  // By tid modulo kRecentSlots, the last tid inserted there, while it is in
  // the set (0: none).
  static constexpr size_t kRecentSlots = 1024;
  static size_t Slot(int32_t tid) { return static_cast<uint32_t>(tid) % kRecentSlots; }
  // Out of line: the set's insert would keep the compiler from inlining
  // the compare above into every caller.
  [[gnu::noinline]] bool InsertNotRecent(int32_t tid) {
    recent_[Slot(tid)] = tid;
    return set_.insert(tid).second;
  }
  std::array<int32_t, kRecentSlots> recent_{};
  absl::flat_hash_set<int32_t> set_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_TOLD_TASKS_H_
