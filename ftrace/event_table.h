#ifndef RINGSIDE_FTRACE_EVENT_TABLE_H_
#define RINGSIDE_FTRACE_EVENT_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ftrace/event_format.h"
#include "ftrace/page_parser.h"
#include "ftrace/tracefs.h"

namespace ringside::ftrace {

// The events whose records ringside decodes into typed messages; everything
// else is kept in the generic form (field names and values).
enum class KnownEvent : uint8_t {
  kOther,
  kPrint,
  kSchedSwitch,
  kSchedWaking,
  kSchedWakeup,
  kSchedWakeupNew,
  kSchedProcessFork,
  kSchedProcessExec,
  kSchedProcessExit,
  kSchedProcessFree,
  kTaskNewtask,
  kTaskRename,
  kCpuFrequency,
  kCpuIdle,
  kMarkVictim,     // oom/mark_victim: the OOM killer's victim.
  kSignalDeliver,  // signal/signal_deliver: a signal taken by its task.
};

// Formats of the events a recording enabled, by event id, and safe readers
// for their fields. Reads never go outside the record: a field that does not
// fit reads as 0 / empty.
class EventTable {
 public:
  struct Entry {
    EventFormat format;
    KnownEvent known = KnownEvent::kOther;
  };

  // Loads events/<group>/<name>/format for each "group/name" (or every event
  // of "group/*"), from the top-level events directory (formats are global).
  static absl::StatusOr<EventTable> Load(const Tracefs& tracefs,
                                         const std::vector<std::string>& events);
  void Add(EventFormat format);

  const Entry* Find(uint32_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &it->second;
  }
  size_t size() const { return by_id_.size(); }

  // The event id (common_type) of a record, or 0 if it is too short.
  static uint32_t EventId(const RawEvent& e);
  // Integer fields, sign- or zero-extended as the format says.
  static int64_t ReadInt(const RawEvent& e, const FieldFormat* f);
  static uint64_t ReadUint(const RawEvent& e, const FieldFormat* f);
  // String fields (fixed char arrays, __data_loc strings, char tails), up to
  // the first NUL.
  static absl::string_view ReadString(const RawEvent& e, const FieldFormat* f);

 private:
  absl::flat_hash_map<uint32_t, Entry> by_id_;
};

KnownEvent ClassifyEvent(absl::string_view group, absl::string_view name);

}  // namespace ringside::ftrace

#endif  // RINGSIDE_FTRACE_EVENT_TABLE_H_
