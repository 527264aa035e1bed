#include "agent/tracefile/shared_events.h"

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

#include "agent/tracefile/trace_file_reader.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

struct EventKey {
  uint64_t ts_ns;
  uint32_t cpu;
  uint32_t kind;  // The FtraceEvent field, or a compact sched kind.
  int64_t pid;
  auto Tie() const { return std::tie(ts_ns, cpu, kind, pid); }
  bool operator<(const EventKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const EventKey& o) const { return Tie() == o.Tie(); }
};

// Compact sched's kinds, above any FtraceEvent field number.
constexpr uint32_t kCompactSwitch = 1u << 30;
constexpr uint32_t kCompactWaking = kCompactSwitch + 1;

// Calls `fn` with each kernel event of the file at `path`.
template <typename Fn>
absl::Status ForEachKernelEvent(const std::string& path, Fn fn) {
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::string bytes;
  uint64_t offset = 0;
  trace::TracePacket packet;
  while ((*reader)->ReadNextPacket(&bytes, &offset) == TraceFileReader::Result::kPacket) {
    packet.Clear();
    if (!packet.ParseFromString(bytes)) break;
    if (!packet.has_ftrace_events()) continue;
    const trace::FtraceEventBundle& bundle = packet.ftrace_events();
    for (const trace::FtraceEvent& e : bundle.event()) {
      fn(EventKey{e.timestamp(), bundle.cpu(), static_cast<uint32_t>(e.event_case()),
                  static_cast<int64_t>(e.pid())});
    }
    const auto& compact = bundle.compact_sched();
    uint64_t ts = 0;
    for (int i = 0; i < compact.switch_timestamp_size(); i++) {
      ts += compact.switch_timestamp(i);
      fn(EventKey{ts, bundle.cpu(), kCompactSwitch,
                  i < compact.switch_next_pid_size() ? compact.switch_next_pid(i) : -1});
    }
    ts = 0;
    for (int i = 0; i < compact.waking_timestamp_size(); i++) {
      ts += compact.waking_timestamp(i);
      fn(EventKey{ts, bundle.cpu(), kCompactWaking,
                  i < compact.waking_pid_size() ? compact.waking_pid(i) : -1});
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> CountSharedKernelEvents(const std::string& a, const std::string& b,
                                                 uint64_t from_ns, uint64_t to_ns) {
  std::vector<EventKey> held;
  absl::Status st = ForEachKernelEvent(a, [&](const EventKey& k) {
    if (k.ts_ns >= from_ns && k.ts_ns <= to_ns && held.size() < kMaxHeldEvents) held.push_back(k);
  });
  if (!st.ok()) return st;
  std::sort(held.begin(), held.end());
  uint64_t shared = 0;
  st = ForEachKernelEvent(b, [&](const EventKey& k) {
    if (k.ts_ns >= from_ns && k.ts_ns <= to_ns && std::binary_search(held.begin(), held.end(), k)) {
      shared++;
    }
  });
  if (!st.ok()) return st;
  return shared;
}

}  // namespace ringside::agent
