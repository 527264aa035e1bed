#include "agent/sources/ftrace_bundle_writer.h"

#include <unistd.h>

#include <iterator>

#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using ftrace::EventTable;
using ftrace::FieldFormat;
using ftrace::KnownEvent;
using trace::FtraceEvent;
using trace::FtraceEventBundle;

struct FieldMap {
  const char* kernel_name;
  uint32_t proto_field;
};

// The typed message of each known event, by kernel field name. Proto field
// numbers are Perfetto's (see protos/ringside/trace/ftrace_events_*.proto).
struct TypedEvent {
  KnownEvent known;
  uint32_t event_field;
  std::vector<FieldMap> fields;
};

const std::vector<TypedEvent>& TypedEvents() {
  static const auto* events = new std::vector<TypedEvent>{
      {KnownEvent::kPrint, FtraceEvent::kPrintFieldNumber, {{"ip", 1}, {"buf", 2}}},
      {KnownEvent::kSchedSwitch,
       FtraceEvent::kSchedSwitchFieldNumber,
       {{"prev_comm", 1},
        {"prev_pid", 2},
        {"prev_prio", 3},
        {"prev_state", 4},
        {"next_comm", 5},
        {"next_pid", 6},
        {"next_prio", 7}}},
      {KnownEvent::kSchedWaking,
       FtraceEvent::kSchedWakingFieldNumber,
       {{"comm", 1}, {"pid", 2}, {"prio", 3}, {"success", 4}, {"target_cpu", 5}}},
      {KnownEvent::kSchedWakeup,
       FtraceEvent::kSchedWakeupFieldNumber,
       {{"comm", 1}, {"pid", 2}, {"prio", 3}, {"success", 4}, {"target_cpu", 5}}},
      {KnownEvent::kSchedWakeupNew,
       FtraceEvent::kSchedWakeupNewFieldNumber,
       {{"comm", 1}, {"pid", 2}, {"prio", 3}, {"success", 4}, {"target_cpu", 5}}},
      {KnownEvent::kSchedProcessFork,
       FtraceEvent::kSchedProcessForkFieldNumber,
       {{"parent_comm", 1}, {"parent_pid", 2}, {"child_comm", 3}, {"child_pid", 4}}},
      {KnownEvent::kSchedProcessExec,
       FtraceEvent::kSchedProcessExecFieldNumber,
       {{"filename", 1}, {"pid", 2}, {"old_pid", 3}}},
      {KnownEvent::kSchedProcessExit,
       FtraceEvent::kSchedProcessExitFieldNumber,
       {{"comm", 1}, {"pid", 2}, {"tgid", 3}, {"prio", 4}}},
      {KnownEvent::kSchedProcessFree,
       FtraceEvent::kSchedProcessFreeFieldNumber,
       {{"comm", 1}, {"pid", 2}, {"prio", 3}}},
      {KnownEvent::kTaskNewtask,
       FtraceEvent::kTaskNewtaskFieldNumber,
       {{"pid", 1}, {"comm", 2}, {"clone_flags", 3}, {"oom_score_adj", 4}}},
      {KnownEvent::kTaskRename,
       FtraceEvent::kTaskRenameFieldNumber,
       {{"pid", 1}, {"oldcomm", 2}, {"newcomm", 3}, {"oom_score_adj", 4}}},
      {KnownEvent::kCpuFrequency,
       FtraceEvent::kCpuFrequencyFieldNumber,
       {{"state", 1}, {"cpu_id", 2}}},
      {KnownEvent::kCpuIdle, FtraceEvent::kCpuIdleFieldNumber, {{"state", 1}, {"cpu_id", 2}}},
      {KnownEvent::kMarkVictim, FtraceEvent::kMarkVictimFieldNumber, {{"pid", 1}}},
  };
  return *events;
}

// What events are tallied as: the FtraceEvent field a reader of the
// packets finds them in, and its name. Generic events, whatever their name,
// all share the one field.
struct TallyKind {
  uint32_t field;
  const char* name;
};
constexpr TallyKind kKinds[] = {
    {FtraceEvent::kPrintFieldNumber, "print"},
    {FtraceEvent::kSchedSwitchFieldNumber, "sched_switch"},
    {FtraceEvent::kSchedWakingFieldNumber, "sched_waking"},
    {FtraceEvent::kSchedWakeupFieldNumber, "sched_wakeup"},
    {FtraceEvent::kSchedWakeupNewFieldNumber, "sched_wakeup_new"},
    {FtraceEvent::kSchedProcessForkFieldNumber, "sched_process_fork"},
    {FtraceEvent::kSchedProcessExecFieldNumber, "sched_process_exec"},
    {FtraceEvent::kSchedProcessExitFieldNumber, "sched_process_exit"},
    {FtraceEvent::kSchedProcessFreeFieldNumber, "sched_process_free"},
    {FtraceEvent::kTaskNewtaskFieldNumber, "task_newtask"},
    {FtraceEvent::kTaskRenameFieldNumber, "task_rename"},
    {FtraceEvent::kCpuFrequencyFieldNumber, "cpu_frequency"},
    {FtraceEvent::kCpuIdleFieldNumber, "cpu_idle"},
    {FtraceEvent::kMarkVictimFieldNumber, "mark_victim"},
    {FtraceEvent::kGenericFieldNumber, "generic"},
};
static_assert(std::size(kKinds) == FtraceBundleWriter::kNumKinds);
constexpr uint8_t kGenericKind = FtraceBundleWriter::kNumKinds - 1;

uint8_t KindOfField(uint32_t event_field) {
  for (uint8_t k = 0; k < kGenericKind; k++) {
    if (kKinds[k].field == event_field) return k;
  }
  return kGenericKind;
}

bool IsString(const FieldFormat* f) {
  return f->kind == FieldFormat::Kind::kFixedCharArray || f->kind == FieldFormat::Kind::kCharTail ||
         f->kind == FieldFormat::Kind::kDataLocString;
}

void AppendField(ProtoMessage* m, uint32_t number, const ftrace::RawEvent& e,
                 const FieldFormat* f) {
  if (IsString(f)) {
    const absl::string_view s = EventTable::ReadString(e, f);
    m->AppendBytes(number, s.data(), s.size());
  } else if (f->kind == FieldFormat::Kind::kInteger || f->kind == FieldFormat::Kind::kPointer) {
    if (f->is_signed) {
      m->AppendInt(number, EventTable::ReadInt(e, f));
    } else {
      m->AppendVarInt(number, EventTable::ReadUint(e, f));
    }
  }
}

}  // namespace

FtraceBundleWriter::FtraceBundleWriter(const ftrace::EventTable* table, Options options)
    : table_(table),
      options_(options),
      num_cpus_(options.num_cpus != 0 ? options.num_cpus
                                      : static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_CONF))),
      tallies_(num_cpus_, kNumKinds) {}

std::vector<DataSource::EventTally> FtraceBundleWriter::EventTallies() const {
  return tallies_.Collect([](uint32_t kind) {
    return EventTallyTable::KindName{kKinds[kind].field, kKinds[kind].name};
  });
}

FtraceBundleWriter::Resolved FtraceBundleWriter::Resolve(uint32_t id) {
  if (id < resolved_.size() && resolved_[id].known) return resolved_[id].resolved;
  Resolved r;
  r.entry = table_->Find(id);
  if (r.entry != nullptr) r.plan = &PlanFor(*r.entry);
  if (id < kMaxResolvedId) {
    if (id >= resolved_.size()) resolved_.resize(id + 1);
    resolved_[id] = {r, true};
  }
  return r;
}

const FtraceBundleWriter::Plan& FtraceBundleWriter::PlanFor(const EventTable::Entry& entry) {
  auto [it, inserted] = plans_.try_emplace(entry.format.id);
  Plan& plan = it->second;
  if (!inserted) return plan;
  const ftrace::EventFormat& format = entry.format;
  plan.common_pid = format.FindField("common_pid");
  for (const TypedEvent& typed : TypedEvents()) {
    if (typed.known != entry.known) continue;
    plan.event_field = typed.event_field;
    for (const FieldMap& m : typed.fields) {
      if (const FieldFormat* f = format.FindField(m.kernel_name)) {
        plan.fields.emplace_back(f, m.proto_field);
      }
    }
  }
  plan.kind = plan.event_field != 0 ? KindOfField(plan.event_field) : kGenericKind;
  if (entry.known == KnownEvent::kSchedSwitch) {
    plan.prev_state = format.FindField("prev_state");
    plan.pid = format.FindField("next_pid");
    plan.prio = format.FindField("next_prio");
    plan.comm = format.FindField("next_comm");
    plan.prev_pid = format.FindField("prev_pid");
    plan.prev_comm = format.FindField("prev_comm");
  } else if (entry.known == KnownEvent::kTaskNewtask) {
    plan.pid = format.FindField("pid");
    plan.comm = format.FindField("comm");
    plan.clone_flags = format.FindField("clone_flags");
  } else if (entry.known == KnownEvent::kSchedProcessExec) {
    plan.pid = format.FindField("pid");
    plan.filename = format.FindField("filename");
  } else if (entry.known == KnownEvent::kSchedProcessExit) {
    plan.pid = format.FindField("pid");
    plan.comm = format.FindField("comm");
    plan.group_dead = format.FindField("group_dead");  // Newer kernels only.
  } else if (entry.known == KnownEvent::kSchedProcessFree) {
    plan.pid = format.FindField("pid");
    plan.comm = format.FindField("comm");
  } else if (entry.known == KnownEvent::kTaskRename) {
    plan.pid = format.FindField("pid");
    plan.newcomm = format.FindField("newcomm");
  } else if (entry.known == KnownEvent::kSchedWaking) {
    plan.pid = format.FindField("pid");
    plan.prio = format.FindField("prio");
    plan.comm = format.FindField("comm");
    plan.target_cpu = format.FindField("target_cpu");
  } else if (entry.known == KnownEvent::kMarkVictim) {
    plan.pid = format.FindField("pid");
    plan.comm = format.FindField("comm");  // Since 6.8.
  } else if (entry.known == KnownEvent::kSignalDeliver) {
    plan.sig = format.FindField("sig");
    plan.sa_handler = format.FindField("sa_handler");
  }
  return plan;
}

void FtraceBundleWriter::CollectIncident(const ftrace::RawEvent& e, const EventTable::Entry& entry,
                                         const Plan& plan) {
  Incident incident;
  incident.boottime_ns = static_cast<int64_t>(e.timestamp);  // The instance's boot clock.
  if (entry.known == KnownEvent::kMarkVictim) {
    incident.kind = Incident::Kind::kOomKill;
    incident.pid = static_cast<int32_t>(EventTable::ReadInt(e, plan.pid));
    incident.comm = std::string(EventTable::ReadString(e, plan.comm));
  } else if (entry.known == KnownEvent::kSignalDeliver) {
    // Taken by the task it was sent to (the event's own task), with the
    // action it has then: SIG_DFL (0) of a signal whose default is to end
    // the process is a crash, as BPF's incident program decides it; a
    // caught or ignored one is not. SIGKILL cannot be caught.
    const int64_t sig = EventTable::ReadInt(e, plan.sig);
    const bool fatal_by_default = sig == 4 || sig == 6 || sig == 7 || sig == 8 || sig == 11;
    if (EventTable::ReadUint(e, plan.sa_handler) != 0 || !(fatal_by_default || sig == 9)) return;
    incident.kind = Incident::Kind::kFatalSignal;
    incident.pid = static_cast<int32_t>(EventTable::ReadInt(e, plan.common_pid));
    incident.signal = static_cast<int32_t>(sig);
  } else {
    return;
  }
  incidents_.push_back(std::move(incident));
}

void FtraceBundleWriter::TellTracker(const ftrace::RawEvent& e, const EventTable::Entry& entry,
                                     const Plan& plan) {
  DescriptorTracker* t = options_.tracker;
  const int32_t current = static_cast<int32_t>(EventTable::ReadInt(e, plan.common_pid));
  auto sv = [](absl::string_view s) { return std::string_view(s.data(), s.size()); };
  switch (entry.known) {
    case KnownEvent::kTaskNewtask:
      t->OnNewTask(e.timestamp, current, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)),
                   sv(EventTable::ReadString(e, plan.comm)),
                   EventTable::ReadUint(e, plan.clone_flags));
      break;
    case KnownEvent::kSchedProcessExec:
      t->OnExec(e.timestamp, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)), -1,
                sv(EventTable::ReadString(e, plan.filename)), {}, {}, -1, -1);
      break;
    case KnownEvent::kSchedProcessExit:
      t->OnExit(e.timestamp, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)), -1,
                plan.group_dead != nullptr ? (EventTable::ReadInt(e, plan.group_dead) != 0) : -1,
                sv(EventTable::ReadString(e, plan.comm)));
      break;
    case KnownEvent::kTaskRename:
      t->OnRename(e.timestamp, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)),
                  sv(EventTable::ReadString(e, plan.newcomm)));
      break;
    case KnownEvent::kSchedProcessFree:
      t->OnFree(e.timestamp, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)), -1,
                sv(EventTable::ReadString(e, plan.comm)));
      break;
    case KnownEvent::kSchedSwitch: {
      // A dead task's last switch (the tracepoint reports X or Z since
      // Linux 4.14; never set before): names it if nothing else did, as
      // one whose exit came before recording began.
      constexpr int64_t kExitStates = 0x10 | 0x20;
      if ((EventTable::ReadInt(e, plan.prev_state) & kExitStates) == 0) break;
      const int32_t prev = static_cast<int32_t>(EventTable::ReadInt(e, plan.prev_pid));
      if (prev != 0) {
        t->OnFinalSwitch(e.timestamp, prev, -1, sv(EventTable::ReadString(e, plan.prev_comm)));
      }
      break;
    }
    default:
      break;
  }
}

void FtraceBundleWriter::WriteTyped(ProtoMessage* bundle, const ftrace::RawEvent& e,
                                    const EventTable::Entry& entry, const Plan& plan) {
  ProtoMessage* event = bundle->BeginNested(FtraceEventBundle::kEventFieldNumber);
  event->AppendVarInt(FtraceEvent::kTimestampFieldNumber, e.timestamp);
  if (plan.common_pid != nullptr) {
    event->AppendVarInt(FtraceEvent::kPidFieldNumber,
                        static_cast<uint32_t>(EventTable::ReadInt(e, plan.common_pid)));
  }
  if (plan.event_field != 0) {
    ProtoMessage* typed = event->BeginNested(plan.event_field);
    for (const auto& [field, number] : plan.fields) AppendField(typed, number, e, field);
    typed->EndNested();
  } else {
    stats_.generic_events++;
    ProtoMessage* generic = event->BeginNested(FtraceEvent::kGenericFieldNumber);
    generic->AppendString(trace::GenericFtraceEvent::kEventNameFieldNumber, entry.format.name);
    for (const FieldFormat& f : entry.format.fields) {
      ProtoMessage* field = generic->BeginNested(trace::GenericFtraceEvent::kFieldFieldNumber);
      field->AppendString(trace::GenericFtraceEvent::Field::kNameFieldNumber, f.name);
      using GF = trace::GenericFtraceEvent::Field;
      if (IsString(&f)) {
        field->AppendString(GF::kStrValueFieldNumber, EventTable::ReadString(e, &f));
      } else if (f.is_signed) {
        field->AppendInt(GF::kIntValueFieldNumber, EventTable::ReadInt(e, &f));
      } else {
        field->AppendVarInt(GF::kUintValueFieldNumber, EventTable::ReadUint(e, &f));
      }
      field->EndNested();
    }
  }
  event->EndNested();
}

bool FtraceBundleWriter::WriteBundle(TraceWriter* writer, uint32_t cpu,
                                     const std::vector<ftrace::RawEvent>& events,
                                     bool lost_events) {
  compact_.Clear();
  for (uint64_t& n : bundle_events_) n = 0;

  uint64_t dropped_before = 0;
  {
    auto packet = writer->NewTracePacket();
    // Taken once the packet is open: opening it finishes any packet left
    // open before, whose drop is not this bundle's.
    dropped_before = writer->stats().packets_dropped;
    ProtoMessage* bundle = packet->BeginNested(trace::TracePacket::kFtraceEventsFieldNumber);
    bundle->AppendVarInt(FtraceEventBundle::kCpuFieldNumber, cpu);
    for (const ftrace::RawEvent& e : events) {
      const Resolved resolved = Resolve(EventTable::EventId(e));
      if (resolved.entry == nullptr) {
        stats_.unknown_events++;
        continue;
      }
      const EventTable::Entry* entry = resolved.entry;
      const Plan& plan = *resolved.plan;
      stats_.events++;
      bundle_events_[plan.kind]++;
      if (options_.tracker != nullptr) TellTracker(e, *entry, plan);
      if (options_.incidents) CollectIncident(e, *entry, plan);
      if (options_.compact_sched && entry->known == KnownEvent::kSchedSwitch) {
        compact_.AddSwitch(e.timestamp, EventTable::ReadInt(e, plan.prev_state),
                           static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)),
                           static_cast<int32_t>(EventTable::ReadInt(e, plan.prio)),
                           EventTable::ReadString(e, plan.comm));
        stats_.compact_events++;
        continue;
      }
      if (options_.compact_sched && entry->known == KnownEvent::kSchedWaking) {
        compact_.AddWaking(e.timestamp, static_cast<int32_t>(EventTable::ReadInt(e, plan.pid)),
                           static_cast<int32_t>(EventTable::ReadInt(e, plan.target_cpu)),
                           static_cast<int32_t>(EventTable::ReadInt(e, plan.prio)),
                           EventTable::ReadString(e, plan.comm));
        stats_.compact_events++;
        continue;
      }
      WriteTyped(bundle, e, *entry, plan);
    }
    if (lost_events) bundle->AppendBool(FtraceEventBundle::kLostEventsFieldNumber, true);
    compact_.AppendTo(bundle);
  }  // The packet is finished here: written whole, or dropped whole.
  stats_.bundles++;
  const bool dropped = writer->stats().packets_dropped != dropped_before;
  tallies_.AddPacket(cpu, bundle_events_, dropped);
  return !dropped;
}

}  // namespace ringside::agent
