#include "agent/sources/bpf_data_source.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/config/config_limits.h"
#include "agent/sources/bpf_incidents.h"
#include "agent/sources/drain_wait.h"
#include "agent/sources/system_frame_namer.h"
#include "base/boottime.h"
#include "bpf/common_events.h"
#include "bpf/event_types.h"
#include "bpf/records.h"
#include "bpf/stack_events.h"

namespace ringside::agent {

// The config refuses more filter values than the BPF programs' tables hold
// (config_limits.h): the two must agree, checked here, where both
// are seen.
static_assert(kMaxFilterTgids == RS_MAX_FILTER_TGIDS);
static_assert(kMaxCgroupFilterValues == RS_MAX_FILTER_CGROUPS);

namespace {

// Whether a batch holds stacks, or the forks, execs and exits their names
// follow (StackSampleWriter): most batches of a busy machine hold none.
bool ConcernsStacks(const bpf::RecordBatch& batch) {
  return batch.HasAnyOf({RS_EV_STACK_BLOCKED, RS_EV_STACK_CPU_SAMPLE, RS_EV_PROCESS_FORK,
                         RS_EV_PROCESS_EXEC, RS_EV_PROCESS_EXIT});
}

// The non-zero counts of `per_type` (index: BPF record type, then CPU),
// named by their type.
void AppendNonZero(const std::vector<std::vector<uint64_t>>& per_type,
                   std::vector<DataSource::KindCount>* out) {
  for (uint32_t type = 1; type < per_type.size(); type++) {
    for (uint32_t cpu = 0; cpu < per_type[type].size(); cpu++) {
      if (per_type[type][cpu] != 0) {
        out->push_back({cpu, BpfDataSource::EventName(type), per_type[type][cpu]});
      }
    }
  }
}

}  // namespace

const char* BpfDataSource::EventName(uint32_t type) {
  const bpf::EventType* t = bpf::FindEventType(type);
  return t == nullptr ? "unknown" : t->name;
}

BpfDataSource::BpfDataSource(Config config, ProducerBuffer* producer)
    : config_(std::move(config)),
      producer_(producer),
      cgroups_(config_.filter_container_ids, config_.filter_cgroup_paths, RS_MAX_FILTER_CGROUPS) {
  if (!cgroups_.empty()) config_.source.filters.cgroup_set = true;
}

CgroupSelector::Selection BpfDataSource::RefreshCgroupFilter() {
  reader_state_.Check();
  CgroupSelector::Selection selection = cgroups_.Select();
  // A failed update leaves the last set in place; the next refresh retries.
  source_->SetCgroupFilter(selection.cgroup_ids).IgnoreError();
  return selection;
}

absl::StatusOr<std::unique_ptr<BpfDataSource>> BpfDataSource::Create(Config config,
                                                                     ProducerBuffer* producer) {
  std::unique_ptr<BpfDataSource> s(new BpfDataSource(std::move(config), producer));
  absl::StatusOr<std::unique_ptr<bpf::EventSource>> source =
      bpf::EventSource::Load(s->config_.source);
  if (!source.ok()) return source.status();
  s->source_ = std::move(*source);
  if (!s->cgroups_.empty()) {
    const CgroupSelector::Selection first = s->RefreshCgroupFilter();
    for (const std::string& value : first.unmatched) {
      // Paths start with '/', container ids never do (the config checks).
      const bool path = !value.empty() && value[0] == '/';
      s->cgroup_warnings_.push_back(
          absl::StrCat(path ? "filter_cgroup_path '" : "filter_container_id '", value,
                       path ? "' is no cgroup" : "' matches no container's cgroup",
                       " yet: nothing of it is recorded until it appears (looked up every ",
                       s->config_.cgroup_refresh_ms, " ms)"));
    }
    if (first.truncated) {
      s->cgroup_warnings_.push_back(absl::StrCat(
          "filter_container_id and filter_cgroup_path match more than the ", RS_MAX_FILTER_CGROUPS,
          " cgroups the filter holds: the rest are not recorded"));
    }
  }
  const int cpus = s->source_->num_cpus();
  for (int cpu = 0; cpu < cpus; cpu++) {
    s->cpu_writers_.push_back(producer->CreateTraceWriter(static_cast<buffer::WriterID>(1 + cpu)));
  }
  if (s->source_->stacks().flags() != 0) s->SetUpStacks(producer);
  if (s->source_->stalls().blocked_ns() != 0 && s->config_.incidents != nullptr &&
      !s->config_.blocked_thresholds_ns.empty()) {
    s->sweep_ = std::make_unique<StallSweep>(s->config_.blocked_thresholds_ns);
    s->proc_is_hosts_ = ProcNumbersPidsAsTheKernelDoes("/proc");
  }
  s->tallies_ = std::make_unique<EventTallyTable>(static_cast<uint32_t>(cpus), RS_EV_MAX);
  s->drops_seen_.assign(static_cast<size_t>(cpus), 0);
  s->lost_pending_.assign(static_cast<size_t>(cpus), false);
  return s;
}

void BpfDataSource::SetUpStacks(ProducerBuffer* producer) {
  if (config_.tracker == nullptr) {
    stacks_refused_ =
        "stacks need the durable store (durable_buffer_size_kb), which keeps what they refer to";
    return;
  }
  namer_ = config_.frame_namer;
  if (namer_ == nullptr) {
    own_namer_ = MakeSystemFrameNamer();
    namer_ = own_namer_.get();
  }
  stack_trace_writer_ = producer->CreateTraceWriter(kStackWriterId);
  StackSampleWriter::Config c;
  c.producer = producer->producer_id();
  c.writer = kStackWriterId;
  c.interned_budget_bytes = config_.stacks_interned_budget_bytes;
  c.cpu_hz = config_.source.stacks.cpu_hz;
  stacks_ =
      std::make_unique<StackSampleWriter>(c, stack_trace_writer_.get(), config_.tracker, namer_);
  PublishStacks();  // The kernel's symbols, read now.
}

BpfDataSource::~BpfDataSource() { Stop(); }

absl::Status BpfDataSource::Start() {
  if (absl::Status st = source_->Attach(); !st.ok()) return st;
  started_ = true;
  flush_.Open();
  thread_ = std::thread([this] { ConsumerLoop(); });
  return absl::OkStatus();
}

void BpfDataSource::TellIncidents(absl::Span<const bpf::Record> records) {
  for (const bpf::Record& r : records) {
    std::optional<Incident> incident = IncidentOfRecord(r);
    if (!incident.has_value()) continue;
    // A block the sweep found still blocked was told then.
    if (incident->kind == Incident::Kind::kBlocked && sweep_ != nullptr &&
        !sweep_->TellWoken(incident->pid, incident->since_ns, incident->stalled_ns)) {
      continue;
    }
    config_.incidents->OnIncident(*incident);
  }
}

void BpfDataSource::SweepStalls(int64_t now_ns) {
  std::vector<bpf::StallTasks::Blocked> blocked =
      source_->stalls().BlockedSince(static_cast<uint64_t>(now_ns));
  // A block whose wakeup the programs missed ends when its task runs again;
  // one whose task is not in D now (or gone) is over, and dropped. Only
  // with the host's /proc: another namespace's has other tasks under these
  // tids.
  if (proc_is_hosts_) {
    std::erase_if(blocked, [&](const bpf::StallTasks::Blocked& b) {
      if (TaskInD(b.tid)) return false;
      source_->stalls().Forget(b.tid, b.task.since_ns);
      return true;
    });
  }
  for (const Incident& incident : sweep_->Sweep(blocked, now_ns)) {
    config_.incidents->OnIncident(incident);
  }
}

void BpfDataSource::OnBatch(uint32_t cpu, absl::Span<const bpf::RecordView> records) {
  if (cpu >= cpu_writers_.size()) return;
  // Decoded once for both of its readers.
  const absl::Span<const bpf::Record> decoded = bundles_.Decode(records, &decoded_);
  TraceWriter* writer = cpu_writers_[cpu].get();
  const uint64_t dropped_before = writer->stats().packets_dropped;
  bundles_.WriteBundle(writer, cpu, decoded, lost_pending_[cpu],
                       [this](absl::Span<const bpf::Record> part) { teller_.Tell(part); });
  lost_pending_[cpu] = false;
  // An incident's bundle is committed before its listener hears of it: the
  // snapshot it may fire holds it even if this reader cannot answer the
  // snapshot's staging flush in time (a loaded machine, a budget pause).
  if (config_.incidents != nullptr && decoded_.incidents() > 0) writer->Flush();
  // One packet per bundle: it was dropped whole or committed whole.
  tallies_->AddPacket(cpu, bundles_.last_bundle_events(),
                      writer->stats().packets_dropped != dropped_before);
  // After the bundle: a snapshot the listener asks for holds the incident.
  if (config_.incidents != nullptr && decoded_.incidents() > 0) TellIncidents(decoded);
  if (stacks_ != nullptr && ConcernsStacks(decoded_)) {
    for (const bpf::Record& r : decoded) {
      if (r.type == RS_EV_PROCESS_EXIT && r.exit().group_dead) exited_.push_back(r.exit().tgid);
    }
    stacks_->Write(decoded);
    PublishStacks();
  }
  events_.store(bundles_.total_events(), std::memory_order_relaxed);
  malformed_.store(bundles_.stats().malformed, std::memory_order_relaxed);
}

uint64_t BpfDataSource::ReadRings(int timeout_ms, uint64_t batches_before_ns) {
  reader_state_.Check();
  // Processes that exited before the last pass: their stacks recorded
  // before the exit have been read by now (records are read CPU by CPU, so
  // some came after the exit's), and what the namer kept of them can go.
  if (namer_ != nullptr) {
    for (int32_t tgid : exited_before_) namer_->ForgetProcess(tgid);
    if (!exited_before_.empty()) PublishStacks();
    exited_before_.swap(exited_);
    exited_.clear();
  }
  // Drops since the last look mark the next bundle of their CPU.
  for (uint32_t cpu = 0; cpu < drops_seen_.size(); cpu++) {
    const uint64_t d = source_->drops_of_cpu(cpu);
    if (d != drops_seen_[cpu]) {
      drops_seen_[cpu] = d;
      lost_pending_[cpu] = true;
    }
  }
  auto on_batch = [this](uint32_t cpu, absl::Span<const bpf::RecordView> records) {
    OnBatch(cpu, records);
  };
  if (timeout_ms > 0) {
    // A failed wait is retried next round.
    return source_->Poll(timeout_ms, on_batch).value_or(0);
  }
  return source_->DrainBefore(batches_before_ns, on_batch);
}

void BpfDataSource::ConsumerLoop() {
  pthread_setname_np(pthread_self(), "rs-bpf");
  reader_state_.Claim();
  const auto now_ns = [] { return static_cast<int64_t>(base::BoottimeNs()); };
  DrainWait wait(config_.drain_period_ms, now_ns());
  const int64_t refresh_ns = int64_t{config_.cgroup_refresh_ms} * 1'000'000;
  int64_t next_refresh_ns = now_ns() + refresh_ns;
  while (!stop_.load(std::memory_order_acquire)) {
    // No longer than the sweep and the cgroup filter's refresh can wait.
    int64_t deadline_ns = sweep_ != nullptr ? sweep_->next_ns() : INT64_MAX;
    if (!cgroups_.empty()) deadline_ns = std::min(deadline_ns, next_refresh_ns);
    wait.AfterPass(ReadRings(wait.TimeoutMs(now_ns(), deadline_ns)), now_ns());
    ServeFlushRequests();
    pacer_.AfterPass(stop_, [this] { return flush_.UrgentPending(); });
    ServeFlushRequests();  // One that cut a budget pause short.
    if (!cgroups_.empty() && now_ns() >= next_refresh_ns) {
      RefreshCgroupFilter();
      next_refresh_ns = now_ns() + refresh_ns;
    }
    if (sweep_ != nullptr && sweep_->Due(base::BoottimeNs())) SweepStalls(base::BoottimeNs());
  }
}

void BpfDataSource::ServeFlushRequests() {
  const uint64_t pending = flush_.Pending();
  if (pending == 0) return;
  // A pass begun before the request (the one Wake() cut short may have been
  // half done) does not cover it: this one starts after it. A background
  // request needs what came before it: CPUs whose batches began since are
  // not interrupted (an IPI to each, every second).
  ReadRings(0, flush_.PendingBefore());
  for (auto& w : cpu_writers_) w->Flush();
  if (stacks_ != nullptr) stacks_->Flush();
  flush_.Served(pending);
}

bool BpfDataSource::FlushStaging(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  const uint64_t n = flush_.Request([this] { source_->Wake(); });
  if (n == 0) return false;  // Not started, or stopping.
  return flush_.Await(n, deadline);
}

void BpfDataSource::StopRecording() {
  if (started_ && source_ != nullptr) source_->SetRecording(false);
}

void BpfDataSource::Stop() {
  if (stopped_ || source_ == nullptr) return;
  stopped_ = true;
  flush_.Close();
  stop_.store(true, std::memory_order_release);
  source_->Wake();
  if (thread_.joinable()) thread_.join();
  reader_state_.Claim();
  if (started_) {
    source_->Detach();
    ReadRings(0);
  }
  for (auto& w : cpu_writers_) w->Flush();
  if (stacks_ != nullptr) stacks_->Flush();
}

uint64_t BpfDataSource::events_lost() const {
  uint64_t n = 0;
  for (const Loss& l : Losses()) n += l.events;
  return n;
}

std::vector<DataSource::Loss> BpfDataSource::Losses() const {
  std::vector<Loss> out;
  std::vector<std::vector<uint64_t>> per_type = source_->all_drops_per_cpu();
  // Once stopped, records still in a batch are those of a CPU that was
  // offline at the last drain: lost too.
  for (uint32_t type = 1; stopped_ && type < per_type.size(); type++) {
    const std::vector<uint64_t> waiting = source_->records_waiting(type);
    for (size_t cpu = 0; cpu < per_type[type].size() && cpu < waiting.size(); cpu++) {
      per_type[type][cpu] += waiting[cpu];
    }
  }
  AppendNonZero(per_type, &out);
  // Runs the kernel skipped are not per CPU: reported once, on CPU 0.
  uint64_t missed = 0;
  for (const bpf::EventSource::ProgramStats& p : source_->program_stats()) missed += p.missed;
  if (missed != 0) out.push_back(Loss{0, "bpf_missed_runs", missed});
  // Records given up unread, neither known by CPU nor kind, so on CPU 0:
  // each time a ring was found corrupt, the rest of its pending data (at
  // least one record: counted as one); and records whose size did not
  // match their type. Neither is expected; both are losses, so counted.
  if (const uint64_t n = source_->reader().corruptions(); n != 0) {
    out.push_back(Loss{0, "ring_corruptions", n});
  }
  if (const uint64_t n = malformed_.load(std::memory_order_relaxed); n != 0) {
    out.push_back(Loss{0, "malformed_records", n});
  }
  // Tasks whose stalls went unmeasured: stall_tasks was full.
  if (const uint64_t n = source_->stalls().full(); n != 0) {
    out.push_back(Loss{0, "stall_tasks_full", n});
  }
  if (stacks_ != nullptr) {
    // Stacks the kernel could not take or cut, by kind and CPU
    // (bpf/stack_events.h), and records that came with no frame at all.
    static constexpr const char* kStackLossNames[] = {
        "stack_kernel_failed",        "stack_user_fault", "stack_user_failed",
        "stack_blocked_threads_full", "stack_truncated",  "stack_resume_unseen"};
    static_assert(std::size(kStackLossNames) == RS_STACK_LOSS_MAX, "a name for each kind");
    const std::vector<std::vector<uint64_t>> losses = source_->stacks().losses_per_cpu();
    for (uint32_t kind = 0; kind < RS_STACK_LOSS_MAX; kind++) {
      for (uint32_t cpu = 0; cpu < losses[kind].size(); cpu++) {
        if (losses[kind][cpu] != 0)
          out.push_back(Loss{cpu, kStackLossNames[kind], losses[kind][cpu]});
      }
    }
    if (const uint64_t n = stack_figures_.stacks_unreadable(); n != 0) {
      out.push_back(Loss{0, "stack_unreadable", n});
    }
  }
  return out;
}

DataSource::StagingMemory BpfDataSource::staging_memory() const {
  return {config_.source.ring_size_per_cpu * cpu_writers_.size(), 0};
}

std::vector<DataSource::EventTally> BpfDataSource::EventTallies() const {
  return tallies_->Collect([](uint32_t type) {
    return EventTallyTable::KindName{BpfBundleWriter::FieldOf(type), EventName(type)};
  });
}

std::vector<DataSource::KindCount> BpfDataSource::EventsSeen() const {
  std::vector<KindCount> out;
  AppendNonZero(source_->all_seen_per_cpu(), &out);
  return out;
}

}  // namespace ringside::agent
