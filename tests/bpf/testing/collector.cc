#include "tests/bpf/testing/collector.h"

#include <bpf/bpf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside::bpf::testing {
namespace {

template <typename T>
void Take(const void* data, size_t size, std::vector<T>* out, std::vector<std::string>* errors) {
  if (size < sizeof(T)) {
    errors->push_back(absl::StrCat("record of ", size, " bytes, expected ", sizeof(T)));
    return;
  }
  T t;
  std::memcpy(&t, data, sizeof(T));
  out->push_back(t);
}

}  // namespace

void Collected::Add(uint32_t cpu, const void* data, size_t size) {
  total++;
  rs_event_header h;
  if (size < sizeof(h)) {
    errors.push_back(absl::StrCat("record of ", size, " bytes has no header"));
    return;
  }
  std::memcpy(&h, data, sizeof(h));
  if (h.cpu != cpu) errors.push_back(absl::StrCat("record of CPU ", h.cpu, " in ring ", cpu));
  if (h.size != size) errors.push_back(absl::StrCat("header size ", h.size, " != ", size));
  switch (h.type) {
    case RS_EV_SCHED_SWITCH:
      if (last_switch_ts_.size() <= cpu) last_switch_ts_.resize(cpu + 1, 0);
      if (h.ts_ns < last_switch_ts_[cpu]) {
        errors.push_back(absl::StrCat("sched_switch on CPU ", cpu, " went back in time"));
      }
      last_switch_ts_[cpu] = h.ts_ns;
      return Take(data, size, &switches, &errors);
    case RS_EV_SCHED_WAKING:
      return Take(data, size, &wakeups, &errors);
    case RS_EV_SCHED_WAKEUP_NEW:
      return Take(data, size, &wakeups_new, &errors);
    case RS_EV_SCHED_MIGRATE:
      return Take(data, size, &migrations, &errors);
    case RS_EV_PROCESS_FORK:
      return Take(data, size, &forks, &errors);
    case RS_EV_PROCESS_EXEC:
      return Take(data, size, &execs, &errors);
    case RS_EV_PROCESS_EXIT:
      return Take(data, size, &exits, &errors);
    case RS_EV_TASK_RENAME:
      return Take(data, size, &renames, &errors);
    case RS_EV_PROCESS_FREE:
      return Take(data, size, &frees, &errors);
    case RS_EV_OOM_KILL:
      return Take(data, size, &ooms, &errors);
    case RS_EV_FATAL_SIGNAL:
      return Take(data, size, &signals, &errors);
    case RS_EV_CORE_DUMP:
      return Take(data, size, &core_dumps, &errors);
    default:
      errors.push_back(absl::StrCat("unknown record type ", h.type));
  }
}

void CollectUntilExit(EventSource* source, pid_t child, Collected* out, int* status) {
  auto add = [out](uint32_t cpu, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) out->Add(cpu, r.data, r.size);
  };
  int st = 0;
  while (waitpid(child, &st, WNOHANG) == 0) ASSERT_TRUE(source->Poll(10, add).ok());
  source->Drain(add);
  if (status != nullptr) *status = st;
}

std::unique_ptr<EventSource> LoadOrSkipReason(const EventSource::Options& options,
                                              std::string* skip) {
  absl::StatusOr<std::unique_ptr<EventSource>> s = EventSource::Load(options);
  if (s.ok()) return std::move(*s);
  if (s.status().code() == absl::StatusCode::kPermissionDenied ||
      s.status().code() == absl::StatusCode::kUnavailable) {
    *skip = std::string(s.status().message());
    return nullptr;
  }
  ADD_FAILURE() << s.status();
  return nullptr;
}

std::map<std::pair<std::string, uint32_t>, std::string> LoadedBpfObjects() {
  std::map<std::pair<std::string, uint32_t>, std::string> out;
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_prog_info info;
    std::memset(&info, 0, sizeof(info));
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) out[{"prog", id}] = info.name;
    close(fd);
  }
  id = 0;
  while (bpf_map_get_next_id(id, &id) == 0) {
    const int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_map_info info;
    std::memset(&info, 0, sizeof(info));
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) out[{"map", id}] = info.name;
    close(fd);
  }
  return out;
}

std::string Comm(const char (&comm)[RS_TASK_COMM_LEN]) {
  return std::string(comm, strnlen(comm, RS_TASK_COMM_LEN));
}

}  // namespace ringside::bpf::testing
