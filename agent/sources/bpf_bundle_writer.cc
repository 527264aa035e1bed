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

// Where the records of one bundle go: typed events into the bundle, the
// switches and wakings into its compact_sched columns.
struct BundleOut {
  ProtoMessage* bundle;
  CompactSchedColumns* compact;
};

// Writes a record into the bundle being written.
using EncodeFn = void (*)(const bpf::Record& r, BundleOut* out);

// Inlined where AddToBundle() adds the two: most records of any batch.
[[gnu::always_inline]] inline void AddSwitch(const bpf::Record& r, BundleOut* out) {
  const rs_sched_switch& e = r.sched_switch();
  out->compact->AddSwitch(e.h.ts_ns, e.prev_state, e.next_pid, e.next_prio, e.next_comm);
}

// Compact, as switches: the waker is whoever runs on this CPU then.
[[gnu::always_inline]] inline void AddWaking(const bpf::Record& r, BundleOut* out) {
  const rs_sched_wakeup& e = r.wakeup();
  out->compact->AddWaking(e.h.ts_ns, e.pid, e.target_cpu, e.prio, e.comm);
}

// Writes the record `r.*kRecord()` as an FtraceEvent: its timestamp, the
// task that ran (`kRanPid`, as ftrace's common_pid: trace_processor files
// the event under that thread), and the payload in the FtraceEvent field
// of the record's type, which `kFields` fills.
template <typename T, const T& (bpf::Record::*kRecord)() const, int32_t T::*kRanPid,
          void (*kFields)(const T&, ProtoMessage*)>
void WriteTypedEvent(const bpf::Record& r, BundleOut* out) {
  const T& e = (r.*kRecord)();
  ProtoMessage* event = out->bundle->BeginNested(FtraceEventBundle::kEventFieldNumber);
  event->AppendVarInt(FtraceEvent::kTimestampFieldNumber, e.h.ts_ns);
  event->AppendVarInt(FtraceEvent::kPidFieldNumber, static_cast<uint32_t>(e.*kRanPid));
  ProtoMessage* payload = event->BeginNested(BpfBundleWriter::FieldOf(r.type));
  kFields(e, payload);
  payload->EndNested();
  event->EndNested();
}

void WakeupNewFields(const rs_sched_wakeup& e, ProtoMessage* m) {
  using W = trace::SchedWakeupFtraceEvent;
  m->AppendString(W::kCommFieldNumber, Comm(e.comm));
  m->AppendInt(W::kPidFieldNumber, e.pid);
  m->AppendInt(W::kPrioFieldNumber, e.prio);
  m->AppendInt(W::kSuccessFieldNumber, 1);
  m->AppendInt(W::kTargetCpuFieldNumber, e.target_cpu);
}

void MigrateFields(const rs_sched_migrate& e, ProtoMessage* m) {
  using M = trace::SchedMigrateTaskFtraceEvent;
  m->AppendString(M::kCommFieldNumber, Comm(e.comm));
  m->AppendInt(M::kPidFieldNumber, e.pid);
  m->AppendInt(M::kPrioFieldNumber, e.prio);
  m->AppendInt(M::kOrigCpuFieldNumber, e.orig_cpu);
  m->AppendInt(M::kDestCpuFieldNumber, e.dest_cpu);
}

void ForkFields(const rs_process_fork& e, ProtoMessage* m) {
  using F = trace::SchedProcessForkFtraceEvent;
  m->AppendString(F::kParentCommFieldNumber, Comm(e.parent_comm));
  m->AppendInt(F::kParentPidFieldNumber, e.parent_pid);
  m->AppendString(F::kChildCommFieldNumber, Comm(e.child_comm));
  m->AppendInt(F::kChildPidFieldNumber, e.child_pid);
  m->AppendInt(F::kParentTgidFieldNumber, e.parent_tgid);
  m->AppendInt(F::kChildTgidFieldNumber, e.child_tgid);
}

// With ringside's extension fields: argv, uid, tgid and ppid.
void ExecFields(const rs_process_exec& e, ProtoMessage* m) {
  using X = trace::SchedProcessExecFtraceEvent;
  m->AppendString(X::kFilenameFieldNumber, View(bpf::ExecFilename(e)));
  m->AppendInt(X::kPidFieldNumber, e.pid);
  m->AppendInt(X::kOldPidFieldNumber, e.old_pid);
  const std::string_view argv = bpf::ExecArgv(e);
  m->AppendBytes(X::kArgvFieldNumber, argv.data(), argv.size());
  m->AppendVarInt(X::kUidFieldNumber, e.uid);
  m->AppendInt(X::kTgidFieldNumber, e.tgid);
  m->AppendInt(X::kPpidFieldNumber, e.ppid);
}

void ExitFields(const rs_process_exit& e, ProtoMessage* m) {
  using X = trace::SchedProcessExitFtraceEvent;
  m->AppendString(X::kCommFieldNumber, Comm(e.comm));
  m->AppendInt(X::kPidFieldNumber, e.pid);
  m->AppendInt(X::kTgidFieldNumber, e.tgid);
  m->AppendInt(X::kExitCodeFieldNumber, e.exit_code);
  m->AppendBool(X::kGroupDeadFieldNumber, e.group_dead != 0);
}

void RenameFields(const rs_task_rename& e, ProtoMessage* m) {
  using T = trace::TaskRenameFtraceEvent;
  m->AppendInt(T::kPidFieldNumber, e.pid);
  m->AppendString(T::kOldcommFieldNumber, Comm(e.old_comm));
  m->AppendString(T::kNewcommFieldNumber, Comm(e.new_comm));
}

void FreeFields(const rs_process_free& e, ProtoMessage* m) {
  using P = trace::SchedProcessFreeFtraceEvent;
  m->AppendString(P::kCommFieldNumber, Comm(e.comm));
  m->AppendInt(P::kPidFieldNumber, e.pid);
  m->AppendInt(P::kPrioFieldNumber, e.prio);
}

void FatalSignalFields(const rs_fatal_signal& e, ProtoMessage* m) {
  using S = trace::SignalGenerateFtraceEvent;
  m->AppendInt(S::kCodeFieldNumber, e.si_code);
  m->AppendString(S::kCommFieldNumber, Comm(e.target_comm));
  m->AppendInt(S::kPidFieldNumber, e.target_pid);
  m->AppendInt(S::kResultFieldNumber, 0);  // Delivered: the program records only those.
  m->AppendInt(S::kSigFieldNumber, e.sig);
}

void OomKillFields(const rs_oom_kill& e, ProtoMessage* m) {
  m->AppendInt(trace::MarkVictimFtraceEvent::kPidFieldNumber, e.pid);
}

// One field of a GenericFtraceEvent `m`: `name` and its value.
using G = trace::GenericFtraceEvent;
void AddGenericInt(ProtoMessage* m, const char* name, int64_t value) {
  ProtoMessage* f = m->BeginNested(G::kFieldFieldNumber);
  f->AppendString(G::Field::kNameFieldNumber, name);
  f->AppendInt(G::Field::kIntValueFieldNumber, value);
  f->EndNested();
}
void AddGenericUint(ProtoMessage* m, const char* name, uint64_t value) {
  ProtoMessage* f = m->BeginNested(G::kFieldFieldNumber);
  f->AppendString(G::Field::kNameFieldNumber, name);
  f->AppendVarInt(G::Field::kUintValueFieldNumber, value);
  f->EndNested();
}
void AddGenericString(ProtoMessage* m, const char* name, absl::string_view value) {
  ProtoMessage* f = m->BeginNested(G::kFieldFieldNumber);
  f->AppendString(G::Field::kNameFieldNumber, name);
  f->AppendString(G::Field::kStrValueFieldNumber, value);
  f->EndNested();
}

// A generic event "ringside_core_dump": pid, tgid, sig and comm.
void CoreDumpFields(const rs_core_dump& e, ProtoMessage* m) {
  m->AppendString(G::kEventNameFieldNumber, "ringside_core_dump");
  AddGenericInt(m, "pid", e.pid);
  AddGenericInt(m, "tgid", e.tgid);
  AddGenericInt(m, "sig", e.sig);
  AddGenericString(m, "comm", Comm(e.comm));
}

// A generic event "ringside_task_blocked" or "ringside_runqueue_delay"
// (`name`): the task, how long, its CPU, its cgroup and the other task.
void StallFields(const char* name, const rs_task_stall& e, ProtoMessage* m) {
  m->AppendString(G::kEventNameFieldNumber, name);
  AddGenericInt(m, "pid", e.pid);
  AddGenericInt(m, "tgid", e.tgid);
  AddGenericInt(m, "stalled_ns", static_cast<int64_t>(bpf::StalledNs(e)));
  AddGenericInt(m, "cpu", e.cpu);
  AddGenericInt(m, "other_pid", e.other_pid);
  AddGenericUint(m, "cgroup_id", e.cgroup_id);
  AddGenericString(m, "comm", Comm(e.comm));
  AddGenericString(m, "other_comm", Comm(e.other_comm));
}

void BlockedFields(const rs_task_stall& e, ProtoMessage* m) {
  StallFields("ringside_task_blocked", e, m);
}
void RunqueueDelayFields(const rs_task_stall& e, ProtoMessage* m) {
  StallFields("ringside_runqueue_delay", e, m);
}

// How each record type is written: one row per type of bpf::kEventTypes.
// The FtraceEvent's pid is the task that ran: the waker, the parent, the
// killer, the sender; for a freed task the one whose RCU callback freed it
// (the freed task's would make a thread of a task the importer may know
// nothing else of).
struct RecordEncoder {
  uint32_t type;  // RS_EV_*.
  EncodeFn encode;
};
constexpr RecordEncoder kEncoders[] = {
    {RS_EV_SCHED_SWITCH, AddSwitch},
    {RS_EV_SCHED_WAKING, AddWaking},
    {RS_EV_SCHED_WAKEUP_NEW, WriteTypedEvent<rs_sched_wakeup, &bpf::Record::wakeup,
                                             &rs_sched_wakeup::waker_pid, WakeupNewFields>},
    {RS_EV_SCHED_MIGRATE, WriteTypedEvent<rs_sched_migrate, &bpf::Record::migrate,
                                          &rs_sched_migrate::pid, MigrateFields>},
    {RS_EV_PROCESS_FORK, WriteTypedEvent<rs_process_fork, &bpf::Record::fork,
                                         &rs_process_fork::parent_pid, ForkFields>},
    {RS_EV_PROCESS_EXEC,
     WriteTypedEvent<rs_process_exec, &bpf::Record::exec, &rs_process_exec::pid, ExecFields>},
    {RS_EV_PROCESS_EXIT,
     WriteTypedEvent<rs_process_exit, &bpf::Record::exit, &rs_process_exit::pid, ExitFields>},
    {RS_EV_TASK_RENAME,
     WriteTypedEvent<rs_task_rename, &bpf::Record::rename, &rs_task_rename::pid, RenameFields>},
    {RS_EV_PROCESS_FREE, WriteTypedEvent<rs_process_free, &bpf::Record::process_free,
                                         &rs_process_free::current_pid, FreeFields>},
    {RS_EV_FATAL_SIGNAL, WriteTypedEvent<rs_fatal_signal, &bpf::Record::fatal_signal,
                                         &rs_fatal_signal::sender_pid, FatalSignalFields>},
    {RS_EV_OOM_KILL,
     WriteTypedEvent<rs_oom_kill, &bpf::Record::oom_kill, &rs_oom_kill::killer_pid, OomKillFields>},
    {RS_EV_CORE_DUMP,
     WriteTypedEvent<rs_core_dump, &bpf::Record::core_dump, &rs_core_dump::pid, CoreDumpFields>},
    // Under the waker (0 when unknown), and the task that waited.
    {RS_EV_TASK_BLOCKED, WriteTypedEvent<rs_task_stall, &bpf::Record::task_stall,
                                         &rs_task_stall::other_pid, BlockedFields>},
    {RS_EV_RUNQUEUE_DELAY, WriteTypedEvent<rs_task_stall, &bpf::Record::task_stall,
                                           &rs_task_stall::pid, RunqueueDelayFields>},
    // Not in the bundle: a StackSample packet of its own (StackSampleWriter).
    {RS_EV_STACK_BLOCKED, nullptr},
    {RS_EV_STACK_CPU_SAMPLE, nullptr},
};

// The encoder of each type, by type; null for a type no row names.
constexpr std::array<EncodeFn, RS_EV_MAX> IndexEncoders() {
  std::array<EncodeFn, RS_EV_MAX> by_type{};
  for (const RecordEncoder& e : kEncoders) by_type[e.type] = e.encode;
  return by_type;
}
constexpr std::array<EncodeFn, RS_EV_MAX> kEncoderOf = IndexEncoders();

// By the rows' types, not by comparing kEncoderOf's pointers with null: GCC
// does not take a function pointer's comparison as a constant expression
// under -fsanitize=undefined (make asan).
constexpr bool EveryEventTypeHasAnEncoder() {
  std::array<bool, RS_EV_MAX> has{};
  for (const RecordEncoder& e : kEncoders) has[e.type] = true;
  for (const bpf::EventType& e : bpf::kEventTypes) {
    if (!has[e.type]) return false;
  }
  return true;
}
static_assert(EveryEventTypeHasAnEncoder(), "a row of bpf::kEventTypes has no row in kEncoders");

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
  BeginBundle(writer, cpu, lost_events);
  AddToBundle(records);
  EndBundle();
}

void BpfBundleWriter::WriteBundle(
    TraceWriter* writer, uint32_t cpu, absl::Span<const bpf::Record> records, bool lost_events,
    absl::FunctionRef<void(absl::Span<const bpf::Record>)> before_part) {
  BeginBundle(writer, cpu, lost_events);
  for (size_t at = 0; at < records.size(); at += kRecordsPerPart) {
    const absl::Span<const bpf::Record> part = records.subspan(at, kRecordsPerPart);
    before_part(part);
    AddToBundle(part);
  }
  EndBundle();
}

void BpfBundleWriter::BeginBundle(TraceWriter* writer, uint32_t cpu, bool lost_events) {
  compact_.Clear();
  for (uint64_t& n : last_bundle_) n = 0;
  packet_.emplace(writer->NewTracePacket());
  bundle_ = (*packet_)->BeginNested(trace::TracePacket::kFtraceEventsFieldNumber);
  bundle_->AppendVarInt(FtraceEventBundle::kCpuFieldNumber, cpu);
  if (lost_events) bundle_->AppendBool(FtraceEventBundle::kLostEventsFieldNumber, true);
}

void BpfBundleWriter::AddToBundle(absl::Span<const bpf::Record> records) {
  BundleOut out{bundle_, &compact_};
  for (const bpf::Record& r : records) {
    // Most of any batch: added in place (no call through the table), and
    // counted once per bundle from the columns' rows (EndBundle).
    if (r.type == RS_EV_SCHED_SWITCH) {
      AddSwitch(r, &out);
      continue;
    }
    if (r.type == RS_EV_SCHED_WAKING) {
      AddWaking(r, &out);
      continue;
    }
    const EncodeFn encode = kEncoderOf[r.type];
    if (encode == nullptr) continue;  // Written elsewhere, and counted there.
    encode(r, &out);
    stats_.events[r.type]++;
    last_bundle_[r.type]++;
  }
}

void BpfBundleWriter::EndBundle() {
  // Only AddToBundle() adds rows to compact_, one per record of these.
  last_bundle_[RS_EV_SCHED_SWITCH] += compact_.switches();
  last_bundle_[RS_EV_SCHED_WAKING] += compact_.wakings();
  stats_.events[RS_EV_SCHED_SWITCH] += compact_.switches();
  stats_.events[RS_EV_SCHED_WAKING] += compact_.wakings();
  compact_.AppendTo(bundle_);
  bundle_->EndNested();
  bundle_ = nullptr;
  packet_.reset();  // Finishes the packet.
  stats_.bundles++;
}

}  // namespace ringside::agent
