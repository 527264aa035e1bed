#ifndef RINGSIDE_AGENT_COMM_INTERNER_H_
#define RINGSIDE_AGENT_COMM_INTERNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

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

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_COMM_INTERNER_H_
