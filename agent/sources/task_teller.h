#ifndef RINGSIDE_AGENT_SOURCES_TASK_TELLER_H_
#define RINGSIDE_AGENT_SOURCES_TASK_TELLER_H_

#include <cstddef>

#include "absl/types/span.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/told_tasks.h"
#include "bpf/records.h"

namespace ringside::agent {

// Tells the descriptor tracker what a BPF source's records say of tasks:
// forks, execs, exits, renames, frees and final switches as they come,
// and a task a scheduling record (a switch, a wakeup, a migration) names,
// the first time it does (DescriptorTracker::OnSeen), so that the few tasks
// a busy CPU runs cost one compare a record, not a call. Not thread-safe:
// the source's reader thread.
class TaskTeller {
 public:
  // Null: tells nothing.
  explicit TaskTeller(DescriptorTracker* tracker) : tracker_(tracker) {}

  void Tell(absl::Span<const bpf::Record> records);

 private:
  // Tasks the tracker has been told of (forked, exec'd or seen), so that
  // scheduling records call it only for a task's first one: a task leaves
  // at its exit and at its final switch (the tracker tells a dying task's
  // last records from a new task's under a reused id). Emptied past
  // kMaxToldTasks.
  static constexpr size_t kMaxToldTasks = 1 << 16;
  DescriptorTracker* const tracker_;
  ToldTasks told_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_TASK_TELLER_H_
