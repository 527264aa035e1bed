#include "agent/tracefile/trace_inspector.h"

#include <fcntl.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/tracefile/trace_file_reader.h"
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

}  // namespace

void TraceSummarizer::AddEventTimestamp(uint64_t ts_ns, uint32_t cpu) {
  AddTimestamp(ts_ns);
  auto [first_on_cpu, inserted] = summary_.first_event_ns_by_cpu.emplace(cpu, ts_ns);
  if (!inserted && ts_ns < first_on_cpu->second) first_on_cpu->second = ts_ns;
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

void TraceSummarizer::SetError(uint64_t offset, std::string message, bool not_a_trace) {
  summary_.error = TraceSummary::Error{offset, std::move(message), not_a_trace};
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
  if (p.has_clock_snapshot()) AddClockSnapshot(p.clock_snapshot());
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
    if (p.has_service_event() && p.service_event().tracing_started() &&
        !summary_.tracing_started_ns) {
      summary_.tracing_started_ns = p.timestamp();
    }
  }

  if (p.has_ftrace_events()) AddFtraceBundle(p.ftrace_events());
  if (p.has_process_tree()) AddProcessTree(p.process_tree());
  stacks_.AddPacket(p);
  AddStats(p);
  return true;
}

void TraceSummarizer::AddClockSnapshot(const trace::ClockSnapshot& snapshot) {
  std::optional<uint64_t> boot, real;
  for (const trace::ClockSnapshot::Clock& c : snapshot.clocks()) {
    if (c.clock_id() == kBoottimeClockId) boot = c.timestamp();
    if (c.clock_id() == kRealtimeClockId) real = c.timestamp();
  }
  if (boot.has_value() && real.has_value()) {
    const int64_t offset = static_cast<int64_t>(*real - *boot);
    if (!summary_.realtime_offset_first_ns) summary_.realtime_offset_first_ns = offset;
    summary_.realtime_offset_last_ns = offset;
  }
}

void TraceSummarizer::AddFtraceBundle(const trace::FtraceEventBundle& bundle) {
  if (bundle.lost_events()) summary_.ftrace_bundles_with_lost_events++;
  summary_.ftrace_events += static_cast<uint64_t>(bundle.event_size());
  auto sched_pid = [this](int32_t pid) {
    if (pid != 0) summary_.sched_pids.insert(pid);
  };
  for (const trace::FtraceEvent& event : bundle.event()) {
    if (event.has_timestamp()) AddEventTimestamp(event.timestamp(), bundle.cpu());
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
      AddEventTimestamp(ts, bundle.cpu());
    }
  }
}

void TraceSummarizer::AddProcessTree(const trace::ProcessTree& tree) {
  for (const auto& process : tree.processes()) {
    summary_.processes[process.pid()] = process.cmdline_size() > 0 ? process.cmdline(0) : "";
    if (process.has_cgroup_id() || process.has_cgroup_path() || process.has_container_id()) {
      summary_.process_cgroups[process.pid()] = TraceSummary::ProcessCgroup{
          process.cgroup_id(), process.cgroup_path(),       process.container_id(),
          process.pod_uid(),   process.container_runtime(), process.k8s_namespace(),
          process.k8s_pod(),   process.k8s_container()};
    } else {
      summary_.process_cgroups.erase(process.pid());
    }
  }
  for (const auto& thread : tree.threads()) {
    summary_.threads[thread.tid()] = TraceSummary::Thread{thread.tgid(), thread.name()};
  }
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
    const trace::TraceStats& stats = packet.trace_stats();
    TraceSummary::Losses& losses = summary_.losses;
    losses = {};
    for (const trace::TraceStats::StagingLoss& l : stats.ringside_staging_loss()) {
      losses.staging_events += l.events_lost();
    }
    summary_.buffers_wrapped = false;
    for (const trace::TraceStats::BufferStats& b : stats.buffer_stats()) {
      if (b.buffer_size() > 0 && b.bytes_written() > b.buffer_size()) {
        summary_.buffers_wrapped = true;
      }
      losses.buffer_chunks_overwritten += b.chunks_overwritten();
      losses.buffer_bytes_overwritten += b.bytes_overwritten();
      losses.buffer_chunks_discarded += b.chunks_discarded();
    }
    for (const trace::TraceStats::EventLoss& l : stats.ringside_event_loss()) {
      losses.events_after_staging += l.events_lost();
    }
    summary_.snapshot_windows.clear();
    for (const trace::TraceStats::SnapshotWindow& w : stats.ringside_snapshot_windows()) {
      summary_.snapshot_windows.push_back({w.first_ns(), w.last_ns()});
    }
  } else {
    ftrace_stats_.clear();
    FlattenNonZero(packet.ftrace_stats(), "ftrace_stats.", &ftrace_stats_);
  }
  summary_.nonzero_stats = trace_stats_;
  summary_.nonzero_stats.insert(summary_.nonzero_stats.end(), ftrace_stats_.begin(),
                                ftrace_stats_.end());
}

uint32_t TraceSummary::MainMachineId() const {
  uint32_t id = 0;
  uint64_t most = 0;
  for (const auto& [machine_id, packets] : packets_by_machine_id) {
    if (machine_id != 0 && packets > most) {
      id = machine_id;
      most = packets;
    }
  }
  return id;
}

std::optional<uint64_t> TraceSummary::HeldFrom() const {
  // A snapshot holds the session's ring: all of it since tracing started
  // while it never wrapped. Any other file holds what came since its own
  // start (a rotated file, since the one before it), which its events say.
  const bool snapshot =
      !snapshot_triggers.empty() || packets_by_type.count("clone_snapshot_trigger");
  if (snapshot && !buffers_wrapped && tracing_started_ns) return *tracing_started_ns;
  if (!last_event_ns) return std::nullopt;
  // The ring let go of its oldest chunks: each CPU's events are whole only
  // from its first one kept, so all of them from the latest of those.
  uint64_t from = 0;
  for (const auto& [cpu, first] : first_event_ns_by_cpu) from = std::max(from, first);
  return from;
}

bool TraceSummary::SpanHolds(std::optional<uint64_t> from_ns, std::optional<uint64_t> until_ns,
                             const Window& w) {
  return from_ns.has_value() && until_ns.has_value() && *from_ns <= w.first_ns &&
         w.last_ns <= *until_ns;
}

bool TraceSummary::Holds(const Window& w) const {
  return SpanHolds(HeldFrom(), last_timestamp_ns, w);
}

uint64_t TraceSummary::PacketsAfterAGap() const {
  uint64_t packets = 0;
  for (const auto& [id, sequence] : sequences) packets += sequence.dropped_marks;
  return packets;
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
    c.pod_namespace = cgroup.pod_namespace;
    c.pod = cgroup.pod;
    c.name = cgroup.container;
    c.processes++;
  }
  return out;
}

std::map<std::string, TraceSummary::Pod> TraceSummary::Pods() const {
  std::map<std::string, Pod> out;
  for (const auto& [pid, cgroup] : process_cgroups) {
    if (cgroup.pod_uid.empty()) continue;
    Pod& pod = out[cgroup.pod_uid];
    if (!cgroup.pod.empty()) {
      pod.pod_namespace = cgroup.pod_namespace;
      pod.name = cgroup.pod;
    }
    if (!cgroup.container.empty()) pod.containers.insert(cgroup.container);
    pod.processes++;
  }
  return out;
}

namespace {

TraceSummary Summarize(TraceFileReader& reader, size_t top_stacks) {
  TraceSummarizer summarizer;
  std::string packet;
  uint64_t offset = 0;
  uint64_t whole_packet_bytes = 0;
  for (;;) {
    TraceFileReader::Result result = reader.ReadNextPacket(&packet, &offset);
    if (result == TraceFileReader::Result::kEnd) break;
    if (result == TraceFileReader::Result::kError) {
      summarizer.SetError(reader.error_offset(), reader.error(), reader.not_a_trace());
      break;
    }
    if (!summarizer.AddPacket(packet, offset)) break;
    whole_packet_bytes = reader.position();
  }
  summarizer.Finish(top_stacks);
  TraceSummary summary = summarizer.summary();
  summary.bytes = whole_packet_bytes;
  const TraceFileReader::CompressionStats& c = reader.compression_stats();
  summary.compression = {c.deflate_packets, c.zstd_packets, c.compressed_bytes, c.inflated_bytes};
  if (reader.gzipped()) {
    // As stored, as for any other file: the gzip'd bytes.
    summary.bytes = reader.stored_position();
    summary.compression.gzip = true;
    summary.compression.gzip_bytes = summary.bytes;
    summary.compression.gzip_inflated_bytes = whole_packet_bytes;
  }
  return summary;
}

}  // namespace

absl::StatusOr<TraceSummary> InspectTraceFile(const std::string& path, size_t top_stacks) {
  if (path == TraceFileReader::kStandardInput) {
    absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
    if (!reader.ok()) return reader.status();
    return Summarize(**reader, top_stacks);
  }
  // O_NONBLOCK: a FIFO is refused by the reader rather than waited on.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    // The reader's own error, which names the path and the cause.
    absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
    if (!reader.ok()) return reader.status();
    return absl::UnavailableError(absl::StrCat("cannot open ", path));
  }
  return InspectOpenTraceFile(fd, path, top_stacks);
}

absl::StatusOr<TraceSummary> InspectOpenTraceFile(int fd, const std::string& path,
                                                  size_t top_stacks) {
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::OpenFile(fd, path);
  if (!reader.ok()) return reader.status();
  // Hashed first, with pread, so the digest covers at least what is read
  // (a file still growing is hashed as it was then).
  absl::StatusOr<FileDigest> digest = DigestFile(fd, path);
  TraceSummary summary = Summarize(**reader, top_stacks);
  if (digest.ok()) summary.digest = *std::move(digest);
  return summary;
}

absl::StatusOr<TraceSummary> InspectTraceRange(int fd, const std::string& name, uint64_t offset,
                                               uint64_t size, size_t top_stacks) {
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return absl::UnavailableError(absl::StrCat("cannot read ", name));
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader =
      TraceFileReader::OpenRange(own, name, offset, size);
  if (!reader.ok()) return reader.status();
  return Summarize(**reader, top_stacks);
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

}  // namespace ringside::agent
