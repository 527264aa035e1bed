#include "ftrace/event_table.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::ftrace {

KnownEvent ClassifyEvent(absl::string_view group, absl::string_view name) {
  if (group == "ftrace" && name == "print") return KnownEvent::kPrint;
  if (group == "task") {
    if (name == "task_newtask") return KnownEvent::kTaskNewtask;
    if (name == "task_rename") return KnownEvent::kTaskRename;
  }
  if (group == "power") {
    if (name == "cpu_frequency") return KnownEvent::kCpuFrequency;
    if (name == "cpu_idle") return KnownEvent::kCpuIdle;
  }
  if (group == "oom" && name == "mark_victim") return KnownEvent::kMarkVictim;
  if (group == "signal" && name == "signal_deliver") return KnownEvent::kSignalDeliver;
  if (group != "sched") return KnownEvent::kOther;
  if (name == "sched_switch") return KnownEvent::kSchedSwitch;
  if (name == "sched_waking") return KnownEvent::kSchedWaking;
  if (name == "sched_wakeup") return KnownEvent::kSchedWakeup;
  if (name == "sched_wakeup_new") return KnownEvent::kSchedWakeupNew;
  if (name == "sched_process_fork") return KnownEvent::kSchedProcessFork;
  if (name == "sched_process_exec") return KnownEvent::kSchedProcessExec;
  if (name == "sched_process_exit") return KnownEvent::kSchedProcessExit;
  if (name == "sched_process_free") return KnownEvent::kSchedProcessFree;
  return KnownEvent::kOther;
}

absl::StatusOr<EventTable> EventTable::Load(const Tracefs& tracefs,
                                            const std::vector<std::string>& events) {
  EventTable table;
  for (const std::string& event : events) {
    std::vector<std::string> parts = absl::StrSplit(event, absl::MaxSplits('/', 1));
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("'", event, "' is not group/name"));
    }
    std::vector<std::string> names;
    if (parts[1] == "*") {
      names = tracefs.GroupEvents(parts[0]);
    } else {
      names.push_back(parts[1]);
    }
    for (const std::string& name : names) {
      absl::StatusOr<std::string> text =
          tracefs.Read(absl::StrCat("events/", parts[0], "/", name, "/format"));
      if (!text.ok()) return text.status();
      absl::StatusOr<EventFormat> format = ParseEventFormat(parts[0], *text);
      if (!format.ok()) {
        return absl::Status(format.status().code(),
                            absl::StrCat(parts[0], "/", name, ": ", format.status().message()));
      }
      table.Add(std::move(*format));
    }
  }
  return table;
}

void EventTable::Add(EventFormat format) {
  const uint32_t id = format.id;
  const KnownEvent known = ClassifyEvent(format.group, format.name);
  by_id_[id] = Entry{std::move(format), known};
}

uint32_t EventTable::EventId(const RawEvent& e) {
  if (e.size < 2) return 0;
  uint16_t id;
  std::memcpy(&id, e.data, sizeof(id));
  return id;
}

uint64_t EventTable::ReadUint(const RawEvent& e, const FieldFormat* f) {
  if (f == nullptr || f->offset > e.size || f->size > e.size - f->offset) return 0;
  const uint8_t* p = e.data + f->offset;
  switch (f->size) {
    case 1:
      return p[0];
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return 0;
  }
}

int64_t EventTable::ReadInt(const RawEvent& e, const FieldFormat* f) {
  const uint64_t v = ReadUint(e, f);
  if (f == nullptr || !f->is_signed) return static_cast<int64_t>(v);
  switch (f->size) {
    case 1:
      return static_cast<int8_t>(v);
    case 2:
      return static_cast<int16_t>(v);
    case 4:
      return static_cast<int32_t>(v);
    default:
      return static_cast<int64_t>(v);
  }
}

absl::string_view EventTable::ReadString(const RawEvent& e, const FieldFormat* f) {
  if (f == nullptr || f->offset > e.size) return {};
  const char* base = reinterpret_cast<const char*>(e.data);
  size_t begin = f->offset;
  size_t length = 0;
  switch (f->kind) {
    case FieldFormat::Kind::kFixedCharArray:
      if (f->size > e.size - f->offset) return {};
      length = f->size;
      break;
    case FieldFormat::Kind::kCharTail:
      length = e.size - f->offset;
      break;
    case FieldFormat::Kind::kDataLocString: {
      // u32: length << 16 | offset from the record start.
      const uint64_t loc = ReadUint(e, f);
      begin = loc & 0xffff;
      length = loc >> 16;
      if (begin > e.size || length > e.size - begin) return {};
      break;
    }
    default:
      return {};
  }
  absl::string_view s(base + begin, length);
  const size_t nul = s.find('\0');
  return nul == absl::string_view::npos ? s : s.substr(0, nul);
}

}  // namespace ringside::ftrace
