// TraceSummary as `ringside inspect` prints it: text for a reader, JSON for
// scripts (its keys documented with the inspect command).

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/tracefile/trace_inspector.h"
#include "agent/tracefile/untrusted_text.h"
#include "base/json_text.h"

namespace ringside::agent {
namespace {

// How many processes and threads the text rendering lists before eliding.
constexpr size_t kMaxListedInText = 50;

// A container id in the text rendering: its first 12 digits, as `docker
// ps` and `crictl ps` show them (--json has the full id).
std::string_view ShortContainerId(std::string_view id) { return id.substr(0, 12); }

std::string FormatSeconds(uint64_t ns) {
  return absl::StrFormat("%u.%09u s", ns / 1000000000, ns % 1000000000);
}

// A BOOTTIME time of the file as Unix time by its last clock snapshot
// holding both clocks; nullopt without one. Modular: a file's clocks may be
// anything.
std::optional<int64_t> ToRealtime(const TraceSummary& s, uint64_t boottime_ns) {
  if (!s.realtime_offset_last_ns) return std::nullopt;
  return static_cast<int64_t>(boottime_ns + static_cast<uint64_t>(*s.realtime_offset_last_ns));
}

// The time as RFC 3339 when the file can place it, else in seconds.
std::string FormatFileTime(const TraceSummary& s, uint64_t boottime_ns) {
  const std::optional<int64_t> real = ToRealtime(s, boottime_ns);
  return real.has_value() ? FormatRealtime(*real) : FormatSeconds(boottime_ns);
}

std::string StatToString(const TraceSummary::StatValue& value) {
  return std::visit([](auto v) { return absl::StrCat(v); }, value);
}

}  // namespace

std::string FormatRealtime(int64_t unix_ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixNanos(unix_ns),
                          absl::UTCTimeZone());
}

namespace {

// The file, its packets and bytes, and what its compression inflates to.
void AppendFileLines(std::string& out, const std::string& path, const TraceSummary& s) {
  absl::StrAppendFormat(&out, "%s: %u packets in %u bytes\n", PrintableText(path), s.packets,
                        s.bytes);
  // "in N bytes" is what the file holds, as stored; what that inflates to
  // is said here, for a gzip'd file as for compressed packets.
  if (const TraceSummary::Compression& c = s.compression; c.gzip) {
    absl::StrAppendFormat(&out,
                          "compressed: gzip (the whole file); %u bytes hold %u bytes of "
                          "packets (%.2fx)\n",
                          c.gzip_bytes, c.gzip_inflated_bytes,
                          c.gzip_inflated_bytes > 0 ? static_cast<double>(c.gzip_bytes) /
                                                          static_cast<double>(c.gzip_inflated_bytes)
                                                    : 0.0);
  }
  if (const TraceSummary::Compression& c = s.compression; c.deflate_packets + c.zstd_packets > 0) {
    std::vector<std::string> codecs;
    if (c.zstd_packets > 0) codecs.push_back(absl::StrCat("zstd (", c.zstd_packets, ")"));
    if (c.deflate_packets > 0) codecs.push_back(absl::StrCat("deflate (", c.deflate_packets, ")"));
    absl::StrAppendFormat(&out, "compressed: %s; %u bytes hold %u bytes of packets (%.2fx)\n",
                          absl::StrJoin(codecs, ", "), c.compressed_bytes, c.inflated_bytes,
                          c.inflated_bytes > 0 ? static_cast<double>(c.compressed_bytes) /
                                                     static_cast<double>(c.inflated_bytes)
                                               : 0.0);
  }
}

void AppendMachineLine(std::string& out, const TraceSummary& s) {
  if (!s.machine.has_value()) return;
  absl::StrAppend(
      &out, "machine: ", s.machine->name.empty() ? "(unnamed)" : PrintableText(s.machine->name));
  std::vector<std::string> ids;
  for (const auto& [id, packets] : s.packets_by_machine_id) {
    ids.push_back(id == 0 ? absl::StrCat("none (", packets, " packets)")
                          : absl::StrFormat("%08x", id));
  }
  absl::StrAppend(&out, ", id ", absl::StrJoin(ids, " and "));
  if (!s.machine->boot_id.empty()) {
    absl::StrAppend(&out, ", boot ", PrintableText(s.machine->boot_id));
  }
  absl::StrAppend(&out, ", ", PrintableText(s.machine->kernel), "\n");
}

void AppendPacketTables(std::string& out, const TraceSummary& s) {
  absl::StrAppend(&out, "\nPackets by type:\n");
  for (const auto& [type, count] : s.packets_by_type) {
    absl::StrAppendFormat(&out, "  %-28s %10u\n", type, count);
  }

  absl::StrAppend(&out, "\nSequences:\n");
  absl::StrAppendFormat(&out, "  %-10s %10s %24s\n", "seq_id", "packets",
                        "previous_packet_dropped");
  for (const auto& [id, seq] : s.sequences) {
    absl::StrAppendFormat(&out, "  %-10u %10u %24u\n", id, seq.packets, seq.dropped_marks);
  }
}

// The time range on both clocks, what the file holds whole, and the
// windows a snapshot was asked for.
void AppendTimeLines(std::string& out, const TraceSummary& s) {
  absl::StrAppend(&out, "\nTime range (CLOCK_BOOTTIME): ");
  if (s.first_timestamp_ns) {
    absl::StrAppendFormat(&out, "%s .. %s (%s)\n", FormatSeconds(*s.first_timestamp_ns),
                          FormatSeconds(*s.last_timestamp_ns),
                          FormatSeconds(*s.last_timestamp_ns - *s.first_timestamp_ns));
  } else {
    absl::StrAppend(&out, "no timestamps\n");
  }
  if (const auto range = s.RealtimeRange(); range.has_value()) {
    absl::StrAppendFormat(&out, "Wall clock (REALTIME): %s .. %s\n", FormatRealtime(range->first),
                          FormatRealtime(range->second));
    if (const auto events = s.RealtimeRange(/*events_only=*/true); events.has_value()) {
      absl::StrAppendFormat(&out, "  its kernel events:   %s .. %s\n",
                            FormatRealtime(events->first), FormatRealtime(events->second));
    }
  }

  if (const std::optional<uint64_t> from = s.HeldFrom(); from && s.last_timestamp_ns) {
    absl::StrAppendFormat(&out, "Held whole: %s .. %s (%s)\n", FormatFileTime(s, *from),
                          FormatFileTime(s, *s.last_timestamp_ns),
                          s.buffers_wrapped
                              ? "the ring had wrapped: from the latest CPU's first event"
                              : "since tracing started");
  }
  for (const TraceSummary::Window& w : s.snapshot_windows) {
    absl::StrAppendFormat(&out, "Window asked: %s .. %s, %s\n", FormatFileTime(s, w.first_ns),
                          FormatFileTime(s, w.last_ns),
                          s.Holds(w) ? "held whole" : "NOT held whole");
  }
}

void AppendEventLines(std::string& out, const TraceSummary& s) {
  absl::StrAppendFormat(&out, "\nFtrace: %u events, %u bundles with lost events\n", s.ftrace_events,
                        s.ftrace_bundles_with_lost_events);

  const std::vector<int32_t> unresolved = s.UnresolvedSchedPids();
  absl::StrAppendFormat(&out, "Sched pids: %u in scheduling events, %u without a name",
                        s.sched_pids.size(), unresolved.size());
  if (!unresolved.empty()) {
    absl::StrAppend(&out, " (");
    for (size_t i = 0; i < unresolved.size() && i < 10; i++) {
      absl::StrAppend(&out, i ? " " : "", unresolved[i]);
    }
    absl::StrAppend(&out, unresolved.size() > 10 ? " ...)" : ")");
  }
  absl::StrAppend(&out, "\n");
}

// The line that stands for the entries a list of `size` left out.
void AppendElidedLine(std::string& out, size_t size) {
  if (size > kMaxListedInText) {
    absl::StrAppendFormat(&out, "  ... and %u more (--json lists all)\n", size - kMaxListedInText);
  }
}

void AppendProcesses(std::string& out, const TraceSummary& s) {
  absl::StrAppendFormat(&out, "\nProcesses (%u):\n", s.processes.size());
  size_t listed = 0;
  for (const auto& [pid, name] : s.processes) {
    if (listed++ == kMaxListedInText) break;
    absl::StrAppendFormat(&out, "  %8d  %s", pid, PrintableText(name));
    auto cgroup = s.process_cgroups.find(pid);
    if (cgroup != s.process_cgroups.end() && !cgroup->second.pod.empty()) {
      const TraceSummary::ProcessCgroup& c = cgroup->second;
      absl::StrAppend(&out, "  [pod ", PrintableText(c.pod_namespace), "/", PrintableText(c.pod),
                      c.container.empty() ? "" : " container ", PrintableText(c.container), "]");
    } else if (cgroup != s.process_cgroups.end() && !cgroup->second.container_id.empty()) {
      absl::StrAppend(&out, "  [container ",
                      PrintableText(ShortContainerId(cgroup->second.container_id)), "]");
    }
    absl::StrAppend(&out, "\n");
  }
  AppendElidedLine(out, s.processes.size());
}

void AppendContainers(std::string& out, const TraceSummary& s) {
  const std::map<std::string, TraceSummary::Container> containers = s.Containers();
  absl::StrAppendFormat(&out, "\nContainers (%u):\n", containers.size());
  if (!containers.empty()) {
    absl::StrAppendFormat(&out, "  %-12s  %-36s  %-10s  %9s  %s\n", "container", "pod uid",
                          "runtime", "processes", "kubernetes");
  }
  size_t listed = 0;
  uint64_t in_containers = 0;
  for (const auto& [id, c] : containers) {
    in_containers += c.processes;
    if (listed++ >= kMaxListedInText) continue;
    // namespace/pod/container, as `kubectl logs -n NAMESPACE POD -c CONTAINER` takes them.
    const std::string kubernetes =
        c.pod.empty() ? "-"
                      : absl::StrCat(PrintableText(c.pod_namespace), "/", PrintableText(c.pod), "/",
                                     c.name.empty() ? "-" : PrintableText(c.name));
    absl::StrAppendFormat(
        &out, "  %-12s  %-36s  %-10s  %9u  %s\n", PrintableText(ShortContainerId(id)),
        c.pod_uid.empty() ? "-" : PrintableText(c.pod_uid),
        c.runtime.empty() ? "-" : PrintableText(c.runtime), c.processes, kubernetes);
  }
  AppendElidedLine(out, containers.size());
  absl::StrAppendFormat(&out, "  %u processes in no container, %u of unknown cgroup\n",
                        s.process_cgroups.size() - in_containers,
                        s.processes.size() - s.process_cgroups.size());
}

void AppendThreads(std::string& out, const TraceSummary& s) {
  absl::StrAppendFormat(&out, "\nThreads (%u):\n", s.threads.size());
  size_t listed = 0;
  for (const auto& [tid, thread] : s.threads) {
    if (listed++ == kMaxListedInText) break;
    absl::StrAppendFormat(&out, "  %8d  tgid %-8d %s\n", tid, thread.tgid,
                          PrintableText(thread.name));
  }
  AppendElidedLine(out, s.threads.size());
}

// A task's names from the file's process tree (empty: not named there).
TaskNames NamesOf(const TraceSummary& s, int32_t tid, int32_t tgid) {
  TaskNames names;
  if (auto t = s.threads.find(tid); t != s.threads.end()) names.thread = t->second.name;
  if (auto p = s.processes.find(tgid); p != s.processes.end()) names.process = p->second;
  return names;
}

void AppendStats(std::string& out, const TraceSummary& s) {
  absl::StrAppend(&out, "\nNon-zero stats:\n");
  if (s.nonzero_stats.empty()) absl::StrAppend(&out, "  none\n");
  for (const auto& [name, value] : s.nonzero_stats) {
    // Entries are keyed by labels from the file (a trigger's name).
    absl::StrAppendFormat(&out, "  %-56s %s\n", PrintableText(name), StatToString(value));
  }
}

void AppendSnapshotTriggers(std::string& out, const TraceSummary& s) {
  if (s.snapshot_triggers.empty()) return;
  absl::StrAppend(&out, "\nSnapshot of ", s.snapshot_triggers.size(), " trigger(s):\n");
  size_t listed = 0;
  for (const trace::TraceStats::SnapshotTrigger& t : s.snapshot_triggers) {
    if (listed++ == kMaxListedInText) break;
    absl::StrAppendFormat(&out, "  %-24s by %s (uid %d) at %s\n", PrintableText(t.trigger_name()),
                          PrintableText(t.producer_name()), t.trusted_producer_uid(),
                          FormatSeconds(t.timestamp()));
    if (t.has_detail()) absl::StrAppend(&out, "    ", PrintableText(t.detail()), "\n");
  }
  AppendElidedLine(out, s.snapshot_triggers.size());
}

nlohmann::json CompressionJson(const TraceSummary::Compression& c) {
  const char* codec = c.zstd_packets > 0 && c.deflate_packets > 0 ? "zstd+deflate"
                      : c.zstd_packets > 0                        ? "zstd"
                      : c.deflate_packets > 0                     ? "deflate"
                                                                  : "none";
  nlohmann::json j = {
      {"codec", codec},
      {"deflate_packets", c.deflate_packets},
      {"zstd_packets", c.zstd_packets},
      {"compressed_bytes", c.compressed_bytes},
      {"inflated_bytes", c.inflated_bytes},
      {"ratio", c.inflated_bytes > 0 ? nlohmann::json(static_cast<double>(c.compressed_bytes) /
                                                      static_cast<double>(c.inflated_bytes))
                                     : nlohmann::json(nullptr)}};
  // A gzip'd file, compressed whole (its packets may be compressed too).
  j["gzip"] =
      c.gzip ? nlohmann::json{{"bytes", c.gzip_bytes}, {"inflated_bytes", c.gzip_inflated_bytes}}
             : nlohmann::json(nullptr);
  return j;
}

nlohmann::json MachineJson(const TraceSummary& s) {
  const uint32_t main_id = s.MainMachineId();
  nlohmann::json j = {
      {"name", s.machine.has_value() ? s.machine->name : ""},
      {"id", main_id != 0 ? nlohmann::json(absl::StrFormat("%08x", main_id)) : nullptr},
      {"boot_id", s.machine.has_value() ? s.machine->boot_id : ""},
      {"kernel", s.machine.has_value() ? s.machine->kernel : ""},
      {"ids", nlohmann::json::array()}};
  for (const auto& [id, packets] : s.packets_by_machine_id) {
    j["ids"].push_back({{"id", id}, {"packets", packets}});
  }
  return j;
}

// null without timestamps.
nlohmann::json TimeRangeJson(const TraceSummary& s) {
  if (!s.first_timestamp_ns) return nullptr;
  nlohmann::json j = {{"clock", "BOOTTIME"},
                      {"first_ns", *s.first_timestamp_ns},
                      {"last_ns", *s.last_timestamp_ns},
                      {"duration_ns", *s.last_timestamp_ns - *s.first_timestamp_ns},
                      {"events_first_ns", nullptr},
                      {"events_last_ns", nullptr},
                      {"realtime_first_ns", nullptr},
                      {"realtime_last_ns", nullptr},
                      {"events_realtime_first_ns", nullptr},
                      {"events_realtime_last_ns", nullptr},
                      {"events_realtime_first", nullptr},
                      {"events_realtime_last", nullptr}};
  if (s.first_event_ns) {
    j["events_first_ns"] = *s.first_event_ns;
    j["events_last_ns"] = *s.last_event_ns;
  }
  if (const auto range = s.RealtimeRange(); range.has_value()) {
    j["realtime_first_ns"] = range->first;
    j["realtime_last_ns"] = range->second;
  }
  if (const auto events = s.RealtimeRange(/*events_only=*/true); events.has_value()) {
    j["events_realtime_first_ns"] = events->first;
    j["events_realtime_last_ns"] = events->second;
    j["events_realtime_first"] = FormatRealtime(events->first);
    j["events_realtime_last"] = FormatRealtime(events->second);
  }
  return j;
}

// A BOOTTIME time of the file, with its RFC 3339 time when the file can
// place it (else null).
nlohmann::json FileTimeJson(const TraceSummary& s, uint64_t boottime_ns) {
  const std::optional<int64_t> real = ToRealtime(s, boottime_ns);
  return nlohmann::json{{"boottime_ns", boottime_ns},
                        {"realtime", real ? nlohmann::json(FormatRealtime(*real)) : nullptr}};
}

// What the file holds whole (null without events), and whether it holds
// each window a snapshot was asked for.
nlohmann::json HeldJson(const TraceSummary& s) {
  const std::optional<uint64_t> from = s.HeldFrom();
  if (!from || !s.last_timestamp_ns) return nullptr;
  return {{"from", FileTimeJson(s, *from)},
          {"until", FileTimeJson(s, *s.last_timestamp_ns)},
          {"ring_wrapped", s.buffers_wrapped}};
}

nlohmann::json SnapshotWindowsJson(const TraceSummary& s) {
  nlohmann::json j = nlohmann::json::array();
  for (const TraceSummary::Window& w : s.snapshot_windows) {
    j.push_back({{"first", FileTimeJson(s, w.first_ns)},
                 {"last", FileTimeJson(s, w.last_ns)},
                 {"held", s.Holds(w)}});
  }
  return j;
}

nlohmann::json LossesJson(const TraceSummary& s) {
  const TraceSummary::Losses& l = s.losses;
  return {{"staging_events", l.staging_events},
          {"buffer_chunks_overwritten", l.buffer_chunks_overwritten},
          {"buffer_bytes_overwritten", l.buffer_bytes_overwritten},
          {"buffer_chunks_discarded", l.buffer_chunks_discarded},
          {"events_after_staging", l.events_after_staging},
          {"packets_after_a_gap", s.PacketsAfterAGap()},
          {"ftrace_bundles_after_a_loss", s.ftrace_bundles_with_lost_events}};
}

nlohmann::json SnapshotTriggersJson(const TraceSummary& s) {
  nlohmann::json j = nlohmann::json::array();
  for (const trace::TraceStats::SnapshotTrigger& t : s.snapshot_triggers) {
    j.push_back({{"trigger_name", t.trigger_name()},
                 {"producer_name", t.producer_name()},
                 {"trusted_producer_uid", t.trusted_producer_uid()},
                 {"timestamp_ns", t.timestamp()},
                 {"detail", t.detail()}});
  }
  return j;
}

nlohmann::json ErrorJson(const TraceSummary& s) {
  if (!s.error) return nullptr;
  return {{"offset", s.error->offset},
          {"message", s.error->message},
          {"not_a_trace", s.error->not_a_trace}};
}

}  // namespace

std::string SummaryToText(const std::string& path, const TraceSummary& s) {
  // Every string the sections print that came from the file goes through
  // PrintableText: a name may hold terminal escapes.
  std::string out;
  AppendFileLines(out, path, s);
  AppendMachineLine(out, s);
  AppendPacketTables(out, s);
  AppendTimeLines(out, s);
  AppendEventLines(out, s);
  AppendProcesses(out, s);
  AppendContainers(out, s);
  AppendThreads(out, s);
  absl::StrAppend(&out, StacksToText(s.stacks, [&s](int32_t tid, int32_t tgid) {
    return NamesOf(s, tid, tgid);
  }));
  AppendStats(out, s);
  AppendSnapshotTriggers(out, s);
  return out;
}

namespace {

// The Kubernetes pods the file's processes belong to: what a fleet's
// indexer looks up a file by.
nlohmann::json PodsJson(const TraceSummary& s) {
  nlohmann::json pods = nlohmann::json::array();
  for (const auto& [uid, pod] : s.Pods()) {
    nlohmann::json p = {{"uid", uid}, {"processes", pod.processes}};
    p["namespace"] = pod.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(pod.pod_namespace);
    p["name"] = pod.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(pod.name);
    p["containers"] = pod.containers;
    pods.push_back(std::move(p));
  }
  return pods;
}

}  // namespace

nlohmann::json FileFactsToJson(const std::string& path, const TraceSummary& s) {
  nlohmann::json j;
  j["file"] = path;
  j["size_bytes"] = s.digest.has_value() ? nlohmann::json(s.digest->size) : nlohmann::json(nullptr);
  j["sha256"] = s.digest.has_value() ? nlohmann::json(s.digest->sha256) : nlohmann::json(nullptr);
  j["compression"] = CompressionJson(s.compression);
  j["machine"] = MachineJson(s);
  j["time_range"] = TimeRangeJson(s);
  j["held"] = HeldJson(s);
  j["snapshot_windows"] = SnapshotWindowsJson(s);
  j["losses"] = LossesJson(s);
  j["snapshot_triggers"] = SnapshotTriggersJson(s);
  j["pods"] = PodsJson(s);
  j["error"] = ErrorJson(s);
  return j;
}

nlohmann::json SummaryToJson(const std::string& path, const TraceSummary& s) {
  nlohmann::json j = FileFactsToJson(path, s);
  j["packets"] = s.packets;
  j["bytes"] = s.bytes;
  j["packets_by_type"] = nlohmann::json::object();
  for (const auto& [type, count] : s.packets_by_type) j["packets_by_type"][type] = count;
  j["sequences"] = nlohmann::json::array();
  for (const auto& [id, seq] : s.sequences) {
    j["sequences"].push_back(
        {{"id", id}, {"packets", seq.packets}, {"previous_packet_dropped", seq.dropped_marks}});
  }
  j["ftrace"] = {{"events", s.ftrace_events},
                 {"bundles_with_lost_events", s.ftrace_bundles_with_lost_events}};
  const std::vector<int32_t> unresolved = s.UnresolvedSchedPids();
  j["sched_pids"] = {{"seen", s.sched_pids.size()},
                     {"unresolved", unresolved.size()},
                     {"unresolved_pids", unresolved}};
  j["processes"] = nlohmann::json::array();
  for (const auto& [pid, name] : s.processes) {
    nlohmann::json process = {{"pid", pid}, {"name", name}};
    auto cgroup = s.process_cgroups.find(pid);
    if (cgroup != s.process_cgroups.end()) {
      const TraceSummary::ProcessCgroup& c = cgroup->second;
      if (c.cgroup_id != 0) process["cgroup_id"] = c.cgroup_id;
      if (!c.cgroup_path.empty()) process["cgroup_path"] = c.cgroup_path;
      if (!c.container_id.empty()) process["container_id"] = c.container_id;
      if (!c.pod_uid.empty()) process["pod_uid"] = c.pod_uid;
      if (!c.pod.empty()) {
        process["pod_namespace"] = c.pod_namespace;
        process["pod_name"] = c.pod;
      }
      if (!c.container.empty()) process["container_name"] = c.container;
    }
    j["processes"].push_back(std::move(process));
  }
  j["containers"] = nlohmann::json::array();
  for (const auto& [id, c] : s.Containers()) {
    nlohmann::json container = {{"container_id", id}, {"processes", c.processes}};
    container["pod_uid"] = c.pod_uid.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.pod_uid);
    container["runtime"] = c.runtime.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.runtime);
    auto or_null = [](const std::string& v) {
      return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
    };
    container["pod_namespace"] = or_null(c.pod_namespace);
    container["pod_name"] = or_null(c.pod);
    container["container_name"] = or_null(c.name);
    j["containers"].push_back(std::move(container));
  }
  j["threads"] = nlohmann::json::array();
  for (const auto& [tid, thread] : s.threads) {
    j["threads"].push_back({{"tid", tid}, {"tgid", thread.tgid}, {"name", thread.name}});
  }
  j["stacks"] =
      StacksToJson(s.stacks, [&s](int32_t tid, int32_t tgid) { return NamesOf(s, tid, tgid); });
  j["nonzero_stats"] = nlohmann::json::object();
  for (const auto& [name, value] : s.nonzero_stats) {
    nlohmann::json& slot = j["nonzero_stats"][name];
    std::visit([&slot](auto v) { slot = v; }, value);
  }
  return j;
}

std::string SummaryToJsonText(const std::string& path, const TraceSummary& summary) {
  return base::JsonText(SummaryToJson(path, summary));
}
}  // namespace ringside::agent
