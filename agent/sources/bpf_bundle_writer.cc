#include "agent/sources/bpf_bundle_writer.h"

#include <cstring>

#include "bpf/incident_events.h"
#include "bpf/process_events.h"
#include "bpf/sched_events.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::FtraceEvent;
using trace::FtraceEventBundle;

absl::string_view Comm(const char* comm) {
  return absl::string_view(comm, strnlen(comm, RS_TASK_COMM_LEN));
}

// A record of type T, copied out (the ring holds it unaligned for us).
template <typename T>
bool Read(const bpf::RecordView& r, T* out) {
  if (r.size < sizeof(T)) return false;
  std::memcpy(out, r.data, sizeof(T));
  return true;
}

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

uint64_t BpfBundleWriter::total_events() const {
  uint64_t n = 0;
  for (uint64_t e : stats_.events) n += e;
  return n;
}

void BpfBundleWriter::WriteBundle(TraceWriter* writer, uint32_t cpu,
                                  absl::Span<const bpf::RecordView> records, bool lost_events) {
  compact_.Clear();

  auto packet = writer->NewTracePacket();
  ProtoMessage* bundle = packet->BeginNested(trace::TracePacket::kFtraceEventsFieldNumber);
  bundle->AppendVarInt(FtraceEventBundle::kCpuFieldNumber, cpu);
  if (lost_events) bundle->AppendBool(FtraceEventBundle::kLostEventsFieldNumber, true);
  for (const bpf::RecordView& r : records) {
    rs_event_header h;
    if (!Read(r, &h) || h.type == 0 || h.type >= RS_EV_MAX || h.size != r.size) {
      stats_.malformed++;
      continue;
    }
    bool ok = true;
    ProtoMessage* event;
    switch (h.type) {
      case RS_EV_SCHED_SWITCH: {
        rs_sched_switch e;
        if (!(ok = Read(r, &e))) break;
        compact_.AddSwitch(e.h.ts_ns, e.prev_state, e.next_pid, e.next_prio, Comm(e.next_comm));
        break;
      }
      case RS_EV_SCHED_WAKEUP:
      case RS_EV_SCHED_WAKEUP_NEW: {
        rs_sched_wakeup e;
        if (!(ok = Read(r, &e))) break;
        WriteWakeup(bundle,
                    h.type == RS_EV_SCHED_WAKEUP ? FtraceEvent::kSchedWakeupFieldNumber
                                                 : FtraceEvent::kSchedWakeupNewFieldNumber,
                    e);
        break;
      }
      case RS_EV_SCHED_MIGRATE: {
        rs_sched_migrate e;
        if (!(ok = Read(r, &e))) break;
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
        rs_process_fork e;
        if (!(ok = Read(r, &e))) break;
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
        rs_process_exec e;
        if (!(ok = Read(r, &e))) break;
        using X = trace::SchedProcessExecFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kSchedProcessExecFieldNumber, &event);
        m->AppendString(
            X::kFilenameFieldNumber,
            absl::string_view(e.filename, std::min<size_t>(e.filename_len, RS_FILENAME_LEN - 1)));
        m->AppendInt(X::kPidFieldNumber, e.pid);
        m->AppendInt(X::kOldPidFieldNumber, e.old_pid);
        m->AppendBytes(X::kArgvFieldNumber, e.argv, std::min<size_t>(e.argv_len, RS_ARGV_LEN));
        m->AppendVarInt(X::kUidFieldNumber, e.uid);
        m->AppendInt(X::kTgidFieldNumber, e.tgid);
        m->AppendInt(X::kPpidFieldNumber, e.ppid);
        EndEvent(m, event);
        break;
      }
      case RS_EV_PROCESS_EXIT: {
        rs_process_exit e;
        if (!(ok = Read(r, &e))) break;
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
        rs_task_rename e;
        if (!(ok = Read(r, &e))) break;
        using T = trace::TaskRenameFtraceEvent;
        ProtoMessage* m =
            BeginEvent(bundle, e.h.ts_ns, e.pid, FtraceEvent::kTaskRenameFieldNumber, &event);
        m->AppendInt(T::kPidFieldNumber, e.pid);
        m->AppendString(T::kOldcommFieldNumber, Comm(e.old_comm));
        m->AppendString(T::kNewcommFieldNumber, Comm(e.new_comm));
        EndEvent(m, event);
        break;
      }
      case RS_EV_FATAL_SIGNAL: {
        rs_fatal_signal e;
        if (!(ok = Read(r, &e))) break;
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
        rs_oom_kill e;
        if (!(ok = Read(r, &e))) break;
        ProtoMessage* m = BeginEvent(bundle, e.h.ts_ns, e.killer_pid,
                                     FtraceEvent::kMarkVictimFieldNumber, &event);
        m->AppendInt(trace::MarkVictimFtraceEvent::kPidFieldNumber, e.pid);
        EndEvent(m, event);
        break;
      }
      case RS_EV_CORE_DUMP: {
        rs_core_dump e;
        if (!(ok = Read(r, &e))) break;
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
        ok = false;
    }
    if (ok) {
      stats_.events[h.type]++;
    } else {
      stats_.malformed++;
    }
  }
  compact_.AppendTo(bundle);
  bundle->EndNested();
  stats_.bundles++;
}

}  // namespace ringside::agent
