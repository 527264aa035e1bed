#include "agent/files/trace_inspector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "agent/files/json_text.h"
#include "agent/files/trace_file_reader.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ringside::agent {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using StatList = std::vector<std::pair<std::string, TraceSummary::StatValue>>;

constexpr uint32_t kBoottimeClockId = 6;
constexpr uint32_t kRealtimeClockId = 1;
// How many processes and threads the text rendering lists before eliding.
constexpr size_t kMaxListedInText = 50;

// A container id in the text rendering: its first 12 digits, as `docker
// ps` and `crictl ps` show them (--json has the full id).
absl::string_view ShortContainerId(absl::string_view id) { return id.substr(0, 12); }

std::string PacketType(const trace::TracePacket& packet) {
  const Reflection* reflection = packet.GetReflection();
  const google::protobuf::OneofDescriptor* data =
      trace::TracePacket::descriptor()->FindOneofByName("data");
  if (const FieldDescriptor* field = reflection->GetOneofFieldDescriptor(packet, data)) {
    return field->name();
  }
  if (packet.has_interned_data()) return "interned_data";
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(packet);
  if (unknown.field_count() > 0) return absl::StrCat("field_", unknown.field(0).number());
  return "empty";
}

// The fields that say which entry of a repeated stat is which: a trigger's
// `name`; a loss's data_source, kind (the event), stage and cpu. They label
// the entry's key rather than being figures of their own.
constexpr const char* kLabelStringFields[] = {"data_source", "kind", "stage"};
constexpr const char* kLabelCpuField = "cpu";

bool IsLabelField(const FieldDescriptor* field) {
  if (field->name() == kLabelCpuField) return true;
  for (const char* label : kLabelStringFields) {
    if (field->name() == label) return true;
  }
  return false;
}

// The key of a repeated entry between its brackets: its name, or its labels
// joined by '/' ("linux.bpf/sched_switch/chunk_pool/cpu1"); empty if it has
// neither, and it is then found by its place. A loss's CPU is part of the
// key even when it is 0, so that CPU 0 and CPU 1 do not look alike.
std::string EntryLabel(const Message& entry) {
  const google::protobuf::Descriptor* descriptor = entry.GetDescriptor();
  const Reflection* reflection = entry.GetReflection();
  auto string_field = [descriptor](const char* name) -> const FieldDescriptor* {
    const FieldDescriptor* field = descriptor->FindFieldByName(name);
    return field != nullptr && field->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
                   !field->is_repeated()
               ? field
               : nullptr;
  };
  if (const FieldDescriptor* name = string_field("name")) {
    return reflection->GetString(entry, name);
  }
  if (string_field(kLabelStringFields[0]) == nullptr) return "";
  std::vector<std::string> parts;
  for (const char* label : kLabelStringFields) {
    if (const FieldDescriptor* field = string_field(label)) {
      parts.push_back(reflection->GetString(entry, field));
    }
  }
  const FieldDescriptor* cpu = descriptor->FindFieldByName(kLabelCpuField);
  if (cpu != nullptr && cpu->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 && !cpu->is_repeated()) {
    parts.push_back(absl::StrCat("cpu", reflection->GetUInt32(entry, cpu)));
  }
  return absl::StrJoin(parts, "/");
}

// Appends every non-zero integer or floating-point field of `message`
// (recursively) to *out, named by its path below `prefix`. `labelled`: the
// message is an entry keyed by its labels, which are then left out.
void FlattenNonZero(const Message& message, const std::string& prefix, StatList* out,
                    bool labelled = false) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (labelled && IsLabelField(field)) continue;
    const std::string name = absl::StrCat(prefix, field->name());
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; i++) {
      const bool rep = field->is_repeated();
      std::string path = rep ? absl::StrCat(name, "[", i, "]") : name;
      // An entry that has a name or labels is found by them, not by place:
      // places shift from one trace to the next.
      bool entry_labelled = false;
      if (rep && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const std::string label = EntryLabel(reflection->GetRepeatedMessage(message, field, i));
        if (!label.empty()) {
          path = absl::StrCat(name, "[", label, "]");
          entry_labelled = true;
        }
      }
      std::optional<TraceSummary::StatValue> value;
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE:
          FlattenNonZero(rep ? reflection->GetRepeatedMessage(message, field, i)
                             : reflection->GetMessage(message, field),
                         path + ".", out, entry_labelled);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          value = rep ? reflection->GetRepeatedUInt64(message, field, i)
                      : reflection->GetUInt64(message, field);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          value = uint64_t{rep ? reflection->GetRepeatedUInt32(message, field, i)
                               : reflection->GetUInt32(message, field)};
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          value = rep ? reflection->GetRepeatedInt64(message, field, i)
                      : reflection->GetInt64(message, field);
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          value = int64_t{rep ? reflection->GetRepeatedInt32(message, field, i)
                              : reflection->GetInt32(message, field)};
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          value = rep ? reflection->GetRepeatedDouble(message, field, i)
                      : reflection->GetDouble(message, field);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          value = double{rep ? reflection->GetRepeatedFloat(message, field, i)
                             : reflection->GetFloat(message, field)};
          break;
        default:
          // Enums (phases), bools and strings are not figures.
          break;
      }
      if (value.has_value() && std::visit([](auto v) { return v != decltype(v){0}; }, *value)) {
        out->emplace_back(path, *value);
      }
    }
  }
}

std::string FormatSeconds(uint64_t ns) {
  return absl::StrFormat("%u.%09u s", ns / 1000000000, ns % 1000000000);
}

std::string StatToString(const TraceSummary::StatValue& value) {
  return std::visit([](auto v) { return absl::StrCat(v); }, value);
}

}  // namespace

void TraceSummarizer::AddEventTimestamp(uint64_t ts_ns) {
  AddTimestamp(ts_ns);
  if (!summary_.first_event_ns || ts_ns < *summary_.first_event_ns) {
    summary_.first_event_ns = ts_ns;
  }
  if (!summary_.last_event_ns || ts_ns > *summary_.last_event_ns) {
    summary_.last_event_ns = ts_ns;
  }
}

void TraceSummarizer::AddTimestamp(uint64_t ts_ns) {
  if (!summary_.first_timestamp_ns || ts_ns < *summary_.first_timestamp_ns) {
    summary_.first_timestamp_ns = ts_ns;
  }
  if (!summary_.last_timestamp_ns || ts_ns > *summary_.last_timestamp_ns) {
    summary_.last_timestamp_ns = ts_ns;
  }
}

void TraceSummarizer::SetError(uint64_t offset, std::string message) {
  summary_.error = TraceSummary::Error{offset, std::move(message)};
}

bool TraceSummarizer::AddPacket(const std::string& bytes, uint64_t offset) {
  packet_.Clear();
  if (!packet_.ParseFromString(bytes)) {
    SetError(offset, absl::StrFormat("corrupt packet #%u (%u bytes): not a valid TracePacket",
                                     summary_.packets + 1, bytes.size()));
    return false;
  }
  const trace::TracePacket& p = packet_;
  summary_.packets++;
  summary_.packets_by_type[PacketType(p)]++;

  summary_.packets_by_machine_id[p.machine_id()]++;
  if (p.has_clock_snapshot()) {
    std::optional<uint64_t> boot, real;
    for (const trace::ClockSnapshot::Clock& c : p.clock_snapshot().clocks()) {
      if (c.clock_id() == kBoottimeClockId) boot = c.timestamp();
      if (c.clock_id() == kRealtimeClockId) real = c.timestamp();
    }
    if (boot.has_value() && real.has_value()) {
      const int64_t offset = static_cast<int64_t>(*real - *boot);
      if (!summary_.realtime_offset_first_ns) summary_.realtime_offset_first_ns = offset;
      summary_.realtime_offset_last_ns = offset;
    }
  }
  if (p.has_system_info() && !summary_.machine.has_value()) {
    const trace::SystemInfo& si = p.system_info();
    summary_.machine =
        TraceSummary::Machine{si.machine_name(), si.boot_id(),
                              absl::StrCat(si.utsname().sysname(), " ", si.utsname().release())};
  }

  TraceSummary::Sequence& sequence = summary_.sequences[p.trusted_packet_sequence_id()];
  sequence.packets++;
  if (p.previous_packet_dropped() != 0) sequence.dropped_marks++;

  if (p.has_timestamp() &&
      (!p.has_timestamp_clock_id() || p.timestamp_clock_id() == kBoottimeClockId)) {
    AddTimestamp(p.timestamp());
  }

  if (p.has_ftrace_events()) {
    const trace::FtraceEventBundle& bundle = p.ftrace_events();
    if (bundle.lost_events()) summary_.ftrace_bundles_with_lost_events++;
    summary_.ftrace_events += static_cast<uint64_t>(bundle.event_size());
    auto sched_pid = [this](int32_t pid) {
      if (pid != 0) summary_.sched_pids.insert(pid);
    };
    for (const trace::FtraceEvent& event : bundle.event()) {
      if (event.has_timestamp()) AddEventTimestamp(event.timestamp());
      if (event.has_sched_switch()) {
        sched_pid(event.sched_switch().prev_pid());
        sched_pid(event.sched_switch().next_pid());
      }
      if (event.has_sched_waking()) sched_pid(event.sched_waking().pid());
      if (event.has_sched_wakeup()) sched_pid(event.sched_wakeup().pid());
      if (event.has_sched_wakeup_new()) sched_pid(event.sched_wakeup_new().pid());
      if (event.has_sched_process_fork()) {
        summary_.event_named_pids.insert(event.sched_process_fork().child_pid());
      }
      if (event.has_task_newtask()) summary_.event_named_pids.insert(event.task_newtask().pid());
      if (event.has_sched_process_exec()) {
        summary_.event_named_pids.insert(event.sched_process_exec().pid());
      }
      if (event.has_task_rename()) summary_.event_named_pids.insert(event.task_rename().pid());
    }
    const auto& compact = bundle.compact_sched();
    for (int32_t pid : compact.switch_next_pid()) sched_pid(pid);
    for (int32_t pid : compact.waking_pid()) sched_pid(pid);
    summary_.ftrace_events +=
        static_cast<uint64_t>(compact.switch_timestamp_size() + compact.waking_timestamp_size());
    for (const auto* deltas : {&compact.switch_timestamp(), &compact.waking_timestamp()}) {
      uint64_t ts = 0;
      for (uint64_t delta : *deltas) {
        ts += delta;
        AddEventTimestamp(ts);
      }
    }
  }

  if (p.has_process_tree()) {
    for (const auto& process : p.process_tree().processes()) {
      summary_.processes[process.pid()] = process.cmdline_size() > 0 ? process.cmdline(0) : "";
      if (process.has_cgroup_id() || process.has_cgroup_path() || process.has_container_id()) {
        summary_.process_cgroups[process.pid()] = TraceSummary::ProcessCgroup{
            process.cgroup_id(), process.cgroup_path(), process.container_id(), process.pod_uid(),
            process.container_runtime()};
      } else {
        summary_.process_cgroups.erase(process.pid());
      }
    }
    for (const auto& thread : p.process_tree().threads()) {
      summary_.threads[thread.tid()] = TraceSummary::Thread{thread.tgid(), thread.name()};
    }
  }

  AddStats(p);
  return true;
}

void TraceSummarizer::AddStats(const trace::TracePacket& packet) {
  if (!packet.has_trace_stats() && !packet.has_ftrace_stats()) return;
  if (packet.has_trace_stats()) {
    trace_stats_.clear();
    // The snapshot's triggers are a list of its own, not figures.
    trace::TraceStats figures = packet.trace_stats();
    figures.clear_ringside_snapshot_triggers();
    FlattenNonZero(figures, "trace_stats.", &trace_stats_);
    summary_.snapshot_triggers.assign(packet.trace_stats().ringside_snapshot_triggers().begin(),
                                      packet.trace_stats().ringside_snapshot_triggers().end());
  } else {
    ftrace_stats_.clear();
    FlattenNonZero(packet.ftrace_stats(), "ftrace_stats.", &ftrace_stats_);
  }
  summary_.nonzero_stats = trace_stats_;
  summary_.nonzero_stats.insert(summary_.nonzero_stats.end(), ftrace_stats_.begin(),
                                ftrace_stats_.end());
}

std::vector<int32_t> TraceSummary::UnresolvedSchedPids() const {
  std::vector<int32_t> out;
  for (int32_t pid : sched_pids) {
    if (!threads.count(pid) && !processes.count(pid) && !event_named_pids.count(pid)) {
      out.push_back(pid);
    }
  }
  return out;
}

std::map<std::string, TraceSummary::Container> TraceSummary::Containers() const {
  std::map<std::string, Container> out;
  for (const auto& [pid, cgroup] : process_cgroups) {
    if (cgroup.container_id.empty()) continue;
    Container& c = out[cgroup.container_id];
    c.pod_uid = cgroup.pod_uid;
    c.runtime = cgroup.runtime;
    c.processes++;
  }
  return out;
}

absl::StatusOr<TraceSummary> InspectTraceFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceSummarizer summarizer;
  std::string packet;
  uint64_t offset = 0;
  uint64_t whole_packet_bytes = 0;
  for (;;) {
    TraceFileReader::Result result = (*reader)->ReadNextPacket(&packet, &offset);
    if (result == TraceFileReader::Result::kEnd) break;
    if (result == TraceFileReader::Result::kError) {
      summarizer.SetError((*reader)->error_offset(), (*reader)->error());
      break;
    }
    if (!summarizer.AddPacket(packet, offset)) break;
    whole_packet_bytes = (*reader)->position();
  }
  TraceSummary summary = summarizer.summary();
  summary.bytes = whole_packet_bytes;
  const TraceFileReader::CompressionStats& c = (*reader)->compression_stats();
  summary.compression = {c.deflate_packets, c.zstd_packets, c.compressed_bytes, c.inflated_bytes};
  return summary;
}

std::optional<std::pair<int64_t, int64_t>> TraceSummary::RealtimeRange(bool events_only) const {
  const std::optional<uint64_t>& first = events_only ? first_event_ns : first_timestamp_ns;
  const std::optional<uint64_t>& last = events_only ? last_event_ns : last_timestamp_ns;
  if (!first || !realtime_offset_first_ns) return std::nullopt;
  // Modular: an untrusted file's clocks may be anything.
  return std::pair<int64_t, int64_t>{
      static_cast<int64_t>(*first + static_cast<uint64_t>(*realtime_offset_first_ns)),
      static_cast<int64_t>(*last + static_cast<uint64_t>(*realtime_offset_last_ns))};
}

std::string FormatRealtime(int64_t unix_ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixNanos(unix_ns),
                          absl::UTCTimeZone());
}

std::string SummaryToText(const std::string& path, const TraceSummary& s) {
  std::string out = absl::StrFormat("%s: %u packets in %u bytes\n", path, s.packets, s.bytes);
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

  if (s.machine.has_value()) {
    absl::StrAppend(&out, "machine: ", s.machine->name.empty() ? "(unnamed)" : s.machine->name);
    std::vector<std::string> ids;
    for (const auto& [id, packets] : s.packets_by_machine_id) {
      ids.push_back(id == 0 ? absl::StrCat("none (", packets, " packets)")
                            : absl::StrFormat("%08x", id));
    }
    absl::StrAppend(&out, ", id ", absl::StrJoin(ids, " and "));
    if (!s.machine->boot_id.empty()) absl::StrAppend(&out, ", boot ", s.machine->boot_id);
    absl::StrAppend(&out, ", ", s.machine->kernel, "\n");
  }

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

  absl::StrAppendFormat(&out, "\nProcesses (%u):\n", s.processes.size());
  size_t listed = 0;
  for (const auto& [pid, name] : s.processes) {
    if (listed++ == kMaxListedInText) break;
    absl::StrAppendFormat(&out, "  %8d  %s", pid, name);
    auto cgroup = s.process_cgroups.find(pid);
    if (cgroup != s.process_cgroups.end() && !cgroup->second.container_id.empty()) {
      absl::StrAppend(&out, "  [container ", ShortContainerId(cgroup->second.container_id), "]");
    }
    absl::StrAppend(&out, "\n");
  }
  if (s.processes.size() > kMaxListedInText) {
    absl::StrAppendFormat(&out, "  ... and %u more (--json lists all)\n",
                          s.processes.size() - kMaxListedInText);
  }
  const std::map<std::string, TraceSummary::Container> containers = s.Containers();
  absl::StrAppendFormat(&out, "\nContainers (%u):\n", containers.size());
  if (!containers.empty()) {
    absl::StrAppendFormat(&out, "  %-12s  %-36s  %-10s  %9s\n", "container", "pod uid", "runtime",
                          "processes");
  }
  listed = 0;
  uint64_t in_containers = 0;
  for (const auto& [id, c] : containers) {
    in_containers += c.processes;
    if (listed++ >= kMaxListedInText) continue;
    absl::StrAppendFormat(&out, "  %-12s  %-36s  %-10s  %9u\n", ShortContainerId(id),
                          c.pod_uid.empty() ? "-" : c.pod_uid, c.runtime.empty() ? "-" : c.runtime,
                          c.processes);
  }
  if (containers.size() > kMaxListedInText) {
    absl::StrAppendFormat(&out, "  ... and %u more (--json lists all)\n",
                          containers.size() - kMaxListedInText);
  }
  absl::StrAppendFormat(&out, "  %u processes in no container, %u of unknown cgroup\n",
                        s.process_cgroups.size() - in_containers,
                        s.processes.size() - s.process_cgroups.size());
  absl::StrAppendFormat(&out, "\nThreads (%u):\n", s.threads.size());
  listed = 0;
  for (const auto& [tid, thread] : s.threads) {
    if (listed++ == kMaxListedInText) break;
    absl::StrAppendFormat(&out, "  %8d  tgid %-8d %s\n", tid, thread.tgid, thread.name);
  }
  if (s.threads.size() > kMaxListedInText) {
    absl::StrAppendFormat(&out, "  ... and %u more (--json lists all)\n",
                          s.threads.size() - kMaxListedInText);
  }

  absl::StrAppend(&out, "\nNon-zero stats:\n");
  if (s.nonzero_stats.empty()) absl::StrAppend(&out, "  none\n");
  for (const auto& [name, value] : s.nonzero_stats) {
    absl::StrAppendFormat(&out, "  %-56s %s\n", name, StatToString(value));
  }
  if (!s.snapshot_triggers.empty()) {
    absl::StrAppend(&out, "\nSnapshot of ", s.snapshot_triggers.size(), " trigger(s):\n");
    listed = 0;
    for (const trace::TraceStats::SnapshotTrigger& t : s.snapshot_triggers) {
      if (listed++ == kMaxListedInText) break;
      absl::StrAppendFormat(&out, "  %-24s by %s (uid %d) at %s\n", t.trigger_name(),
                            t.producer_name(), t.trusted_producer_uid(),
                            FormatSeconds(t.timestamp()));
    }
    if (s.snapshot_triggers.size() > kMaxListedInText) {
      absl::StrAppendFormat(&out, "  ... and %u more (--json lists all)\n",
                            s.snapshot_triggers.size() - kMaxListedInText);
    }
  }
  return out;
}

nlohmann::json SummaryToJson(const std::string& path, const TraceSummary& s) {
  nlohmann::json j;
  j["file"] = path;
  j["packets"] = s.packets;
  j["bytes"] = s.bytes;
  j["compression"] = {{"deflate_packets", s.compression.deflate_packets},
                      {"zstd_packets", s.compression.zstd_packets},
                      {"compressed_bytes", s.compression.compressed_bytes},
                      {"inflated_bytes", s.compression.inflated_bytes}};
  j["machine"] = {{"name", s.machine.has_value() ? s.machine->name : ""},
                  {"boot_id", s.machine.has_value() ? s.machine->boot_id : ""},
                  {"kernel", s.machine.has_value() ? s.machine->kernel : ""},
                  {"ids", nlohmann::json::array()}};
  for (const auto& [id, packets] : s.packets_by_machine_id) {
    j["machine"]["ids"].push_back({{"id", id}, {"packets", packets}});
  }
  j["packets_by_type"] = nlohmann::json::object();
  for (const auto& [type, count] : s.packets_by_type) j["packets_by_type"][type] = count;
  j["sequences"] = nlohmann::json::array();
  for (const auto& [id, seq] : s.sequences) {
    j["sequences"].push_back(
        {{"id", id}, {"packets", seq.packets}, {"previous_packet_dropped", seq.dropped_marks}});
  }
  if (s.first_timestamp_ns) {
    j["time_range"] = {{"clock", "BOOTTIME"},
                       {"first_ns", *s.first_timestamp_ns},
                       {"last_ns", *s.last_timestamp_ns},
                       {"duration_ns", *s.last_timestamp_ns - *s.first_timestamp_ns},
                       {"realtime_first_ns", nullptr},
                       {"realtime_last_ns", nullptr},
                       {"events_realtime_first_ns", nullptr},
                       {"events_realtime_last_ns", nullptr}};
    if (const auto range = s.RealtimeRange(); range.has_value()) {
      j["time_range"]["realtime_first_ns"] = range->first;
      j["time_range"]["realtime_last_ns"] = range->second;
    }
    if (const auto events = s.RealtimeRange(/*events_only=*/true); events.has_value()) {
      j["time_range"]["events_realtime_first_ns"] = events->first;
      j["time_range"]["events_realtime_last_ns"] = events->second;
    }
  } else {
    j["time_range"] = nullptr;
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
    }
    j["processes"].push_back(std::move(process));
  }
  j["containers"] = nlohmann::json::array();
  for (const auto& [id, c] : s.Containers()) {
    nlohmann::json container = {{"container_id", id}, {"processes", c.processes}};
    container["pod_uid"] = c.pod_uid.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.pod_uid);
    container["runtime"] = c.runtime.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.runtime);
    j["containers"].push_back(std::move(container));
  }
  j["threads"] = nlohmann::json::array();
  for (const auto& [tid, thread] : s.threads) {
    j["threads"].push_back({{"tid", tid}, {"tgid", thread.tgid}, {"name", thread.name}});
  }
  j["nonzero_stats"] = nlohmann::json::object();
  for (const auto& [name, value] : s.nonzero_stats) {
    nlohmann::json& slot = j["nonzero_stats"][name];
    std::visit([&slot](auto v) { slot = v; }, value);
  }
  j["snapshot_triggers"] = nlohmann::json::array();
  for (const trace::TraceStats::SnapshotTrigger& t : s.snapshot_triggers) {
    j["snapshot_triggers"].push_back({{"trigger_name", t.trigger_name()},
                                      {"producer_name", t.producer_name()},
                                      {"trusted_producer_uid", t.trusted_producer_uid()},
                                      {"timestamp_ns", t.timestamp()}});
  }
  if (s.error) {
    j["error"] = {{"offset", s.error->offset}, {"message", s.error->message}};
  } else {
    j["error"] = nullptr;
  }
  return j;
}

std::string SummaryToJsonText(const std::string& path, const TraceSummary& summary) {
  return JsonText(SummaryToJson(path, summary));
}

}  // namespace ringside::agent
