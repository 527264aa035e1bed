#include "agent/sources/bpf_bundle_writer.h"

#include <array>
#include <cstring>

#include "bpf/event_types.h"
#include "google/protobuf/descriptor.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::FtraceEvent;
using trace::FtraceEventBundle;

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::string_view Comm(const char (&comm)[RS_TASK_COMM_LEN]) { return View(bpf::CommOf(comm)); }

// The compact columns intern a record's comm array whole, at this size; any
// other array would be taken for a NUL-terminated string.
static_assert(sizeof(rs_sched_switch::next_comm) == CommInterner::kCommBytes &&
              sizeof(rs_sched_wakeup::comm) == CommInterner::kCommBytes);

// Starts an FtraceEvent in `bundle` and returns its payload message.
ProtoMessage* BeginEvent(ProtoMessage* bundle, uint64_t ts, int32_t pid, uint32_t field,
                         ProtoMessage** event) {
  *event = bundle->BeginNested(FtraceEventBundle::kEventFieldNumber);
  (*event)->AppendVarInt(FtraceEvent::kTimestampFieldNumber, ts);
  (*event)->AppendVarInt(FtraceEvent::kPidFieldNumber, static_cast<uint32_t>(pid));
  return (*event)->BeginNested(field);
}

void EndEvent(ProtoMessage* payload, ProtoMessage* event) {
  payload->EndNested();
  event->EndNested();
}

void WriteWakeup(ProtoMessage* bundle, uint32_t field, const rs_sched_wakeup& e) {
  ProtoMessage* event;
  ProtoMessage* w = BeginEvent(bundle, e.h.ts_ns, e.waker_pid, field, &event);
  w->AppendString(trace::SchedWakeupFtraceEvent::kCommFieldNumber, Comm(e.comm));
  w->AppendInt(trace::SchedWakeupFtraceEvent::kPidFieldNumber, e.pid);
  w->AppendInt(trace::SchedWakeupFtraceEvent::kPrioFieldNumber, e.prio);
  w->AppendInt(trace::SchedWakeupFtraceEvent::kSuccessFieldNumber, 1);
  w->AppendInt(trace::SchedWakeupFtraceEvent::kTargetCpuFieldNumber, e.target_cpu);
  EndEvent(w, event);
}

}  // namespace

uint32_t BpfBundleWriter::FieldOf(uint32_t type) {
  // The FtraceEvent field of each row of bpf::kEventTypes, by its name in
  // the generated descriptor (so no field number is written by hand here),
  // looked up once.
  static const std::array<uint32_t, RS_EV_MAX> fields = [] {
    std::array<uint32_t, RS_EV_MAX> by_type{};
    for (const bpf::EventType& e : bpf::kEventTypes) {
      const google::protobuf::FieldDescriptor* f =
          FtraceEvent::descriptor()->FindFieldByName(e.perfetto_event);
      by_type[e.type] = f == nullptr ? 0 : static_cast<uint32_t>(f->number());
    }
    return by_type;
  }();
  return type < RS_EV_MAX ? fields[type] : 0;
}

uint64_t BpfBundleWriter::total_events() const {
  uint64_t n = 0;
  for (uint64_t e : stats_.events) n += e;
  return n;
}

absl::Span<const bpf::Record> BpfBundleWriter::Decode(absl::Span<const bpf::RecordView> records,
                                                      bpf::RecordBatch* batch) {
  stats_.malformed += batch->Decode(records);
  return batch->records();
}

void BpfBundleWriter::WriteBundle(TraceWriter* writer, uint32_t cpu,
                                  absl::Span<const bpf::RecordView> records, bool lost_events) {
  WriteBundle(writer, cpu, Decode(records, &decoded_), lost_events);
}

void BpfBundleWriter::WriteBundle(TraceWriter* writer, uint32_t cpu,
                                  absl::Span<const bpf::Record> records, bool lost_events) {
  compact_.Clear();
  for (uint64_t& n : last_bundle_) n = 0;

  auto packet = writer->NewTracePacket();
  ProtoMessage* bundle = packet->BeginNested(trace::TracePacket::kFtraceEventsFieldNumber);
  bundle->AppendVarInt(FtraceEventBundle::kCpuFieldNumber, cpu);
  if (lost_events) bundle->AppendBool(FtraceEventBundle::kLostEventsFieldNumber, true);
  for (const bpf::Record& r : records) {
    ProtoMessage* event;
    switch (r.type) {
      case RS_EV_SCHED_SWITCH: {
        const rs_sched_switch& e = r.sched_switch();
        compact_.AddSwitch(e.h.ts_ns, e.prev_state, e.next_pid, e.next_prio, e.next_comm);
        break;
      }
      case RS_EV_SCHED_WAKING: {
        // Compact, as switches: the waker is whoever runs on this CPU then.
        const rs_sched_wakeup& e = r.wakeup();
        compact_.AddWaking(e.h.ts_ns, e.pid, e.target_cpu, e.prio, e.comm);
        break;
      }
      case RS_EV_SCHED_WAKEUP_NEW:
        WriteWakeup(bundle, FtraceEvent::kSchedWakeupNewFieldNumber, r.wakeup());
        break;
      case RS_EV_SCHED_MIGRATE: {
        const rs_sched_migrate& e = r.migrate();
        using M = trace::SchedMigrateTaskFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kSchedMigrateTaskFieldNumber, &event);
        m->AppendString(M::kCommFieldNumber, Comm(e.comm));
        m->AppendInt(M::kPidFieldNumber, e.pid);
        m->AppendInt(M::kPrioFieldNumber, e.prio);
        m->AppendInt(M::kOrigCpuFieldNumber, e.orig_cpu);
        m->AppendInt(M::kDestCpuFieldNumber, e.dest_cpu);
        EndEvent(m, event);
        break;
      }
      case RS_EV_PROCESS_FORK: {
        const rs_process_fork& e = r.fork();
        using F = trace::SchedProcessForkFtraceEvent;
        ProtoMessage* m = BeginEvent(bundle, e.h.ts_ns, e.parent_pid,
                                     FtraceEvent::kSchedProcessForkFieldNumber, &event);
        m->AppendString(F::kParentCommFieldNumber, Comm(e.parent_comm));
        m->AppendInt(F::kParentPidFieldNumber, e.parent_pid);
        m->AppendString(F::kChildCommFieldNumber, Comm(e.child_comm));
        m->AppendInt(F::kChildPidFieldNumber, e.child_pid);
        m->AppendInt(F::kParentTgidFieldNumber, e.parent_tgid);
        m->AppendInt(F::kChildTgidFieldNumber, e.child_tgid);
        EndEvent(m, event);
        break;
      }
      case RS_EV_PROCESS_EXEC: {
        const rs_process_exec& e = r.exec();
        using X = trace::SchedProcessExecFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kSchedProcessExecFieldNumber, &event);
        m->AppendString(X::kFilenameFieldNumber, View(bpf::ExecFilename(e)));
        m->AppendInt(X::kPidFieldNumber, e.pid);
        m->AppendInt(X::kOldPidFieldNumber, e.old_pid);
        const std::string_view argv = bpf::ExecArgv(e);
        m->AppendBytes(X::kArgvFieldNumber, argv.data(), argv.size());
        m->AppendVarInt(X::kUidFieldNumber, e.uid);
        m->AppendInt(X::kTgidFieldNumber, e.tgid);
        m->AppendInt(X::kPpidFieldNumber, e.ppid);
        EndEvent(m, event);
        break;
      }
      case RS_EV_PROCESS_EXIT: {
        const rs_process_exit& e = r.exit();
        using X = trace::SchedProcessExitFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kSchedProcessExitFieldNumber, &event);
        m->AppendString(X::kCommFieldNumber, Comm(e.comm));
        m->AppendInt(X::kPidFieldNumber, e.pid);
        m->AppendInt(X::kTgidFieldNumber, e.tgid);
        m->AppendInt(X::kExitCodeFieldNumber, e.exit_code);
        m->AppendBool(X::kGroupDeadFieldNumber, e.group_dead != 0);
        EndEvent(m, event);
        break;
      }
      case RS_EV_TASK_RENAME: {
        const rs_task_rename& e = r.rename();
        using T = trace::TaskRenameFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kTaskRenameFieldNumber, &event);
        m->AppendInt(T::kPidFieldNumber, e.pid);
        m->AppendString(T::kOldcommFieldNumber, Comm(e.old_comm));
        m->AppendString(T::kNewcommFieldNumber, Comm(e.new_comm));
        EndEvent(m, event);
        break;
      }
      case RS_EV_PROCESS_FREE: {
        const rs_process_free& e = r.process_free();
        using P = trace::SchedProcessFreeFtraceEvent;
        // The event's pid is the task that ran, as ftrace's: the importer
        // files the event under that thread (the freed task's would make a
        // thread of a task it may know nothing else of).
        ProtoMessage* m = BeginEvent(bundle, e.h.ts_ns, e.current_pid,
                                     FtraceEvent::kSchedProcessFreeFieldNumber, &event);
        m->AppendString(P::kCommFieldNumber, Comm(e.comm));
        m->AppendInt(P::kPidFieldNumber, e.pid);
        m->AppendInt(P::kPrioFieldNumber, e.prio);
        EndEvent(m, event);
        break;
      }
      case RS_EV_FATAL_SIGNAL: {
        const rs_fatal_signal& e = r.fatal_signal();
        using S = trace::SignalGenerateFtraceEvent;
        ProtoMessage* m = BeginEvent(bundle, e.h.ts_ns, e.sender_pid,
                                     FtraceEvent::kSignalGenerateFieldNumber, &event);
        m->AppendInt(S::kCodeFieldNumber, e.si_code);
        m->AppendString(S::kCommFieldNumber, Comm(e.target_comm));
        m->AppendInt(S::kPidFieldNumber, e.target_pid);
        m->AppendInt(S::kResultFieldNumber, 0);  // Delivered: the program records only those.
        m->AppendInt(S::kSigFieldNumber, e.sig);
        EndEvent(m, event);
        break;
      }
      case RS_EV_OOM_KILL: {
        const rs_oom_kill& e = r.oom_kill();
        ProtoMessage* m = BeginEvent(bundle, e.h.ts_ns, e.killer_pid,
                                     FtraceEvent::kMarkVictimFieldNumber, &event);
        m->AppendInt(trace::MarkVictimFtraceEvent::kPidFieldNumber, e.pid);
        EndEvent(m, event);
        break;
      }
      case RS_EV_CORE_DUMP: {
        const rs_core_dump& e = r.core_dump();
        using G = trace::GenericFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kGenericFieldNumber, &event);
        m->AppendString(G::kEventNameFieldNumber, "ringside_core_dump");
        for (auto [name, value] :
             {std::pair<const char*, int64_t>{"pid", e.pid}, {"tgid", e.tgid}, {"sig", e.sig}}) {
          ProtoMessage* f = m->BeginNested(G::kFieldFieldNumber);
          f->AppendString(G::Field::kNameFieldNumber, name);
          f->AppendInt(G::Field::kIntValueFieldNumber, value);
          f->EndNested();
        }
        ProtoMessage* f = m->BeginNested(G::kFieldFieldNumber);
        f->AppendString(G::Field::kNameFieldNumber, "comm");
        f->AppendString(G::Field::kStrValueFieldNumber, Comm(e.comm));
        f->EndNested();
        EndEvent(m, event);
        break;
      }
      default:
        break;
    }
    stats_.events[r.type]++;
    last_bundle_[r.type]++;
  }
  compact_.AppendTo(bundle);
  bundle->EndNested();
  stats_.bundles++;
}

}  // namespace ringside::agent
