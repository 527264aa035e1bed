#include "agent/sources/bpf_data_source.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "bpf/process_events.h"

namespace ringside::agent {

const char* BpfDataSource::EventName(uint32_t type) {
  switch (type) {
    case RS_EV_SCHED_SWITCH:
      return "sched_switch";
    case RS_EV_SCHED_WAKEUP:
      return "sched_wakeup";
    case RS_EV_SCHED_WAKEUP_NEW:
      return "sched_wakeup_new";
    case RS_EV_SCHED_MIGRATE:
      return "sched_migrate_task";
    case RS_EV_PROCESS_FORK:
      return "sched_process_fork";
    case RS_EV_PROCESS_EXEC:
      return "sched_process_exec";
    case RS_EV_PROCESS_EXIT:
      return "sched_process_exit";
    case RS_EV_TASK_RENAME:
      return "task_rename";
    case RS_EV_OOM_KILL:
      return "mark_victim";
    case RS_EV_FATAL_SIGNAL:
      return "signal_generate";
    case RS_EV_CORE_DUMP:
      return "ringside_core_dump";
    default:
      return "unknown";
  }
}

absl::StatusOr<std::unique_ptr<BpfDataSource>> BpfDataSource::Create(Config config,
                                                                     ProducerBuffer* producer) {
  std::unique_ptr<BpfDataSource> s(new BpfDataSource(std::move(config), producer));
  absl::StatusOr<std::unique_ptr<bpf::EventSource>> source =
      bpf::EventSource::Load(s->config_.source);
  if (!source.ok()) return source.status();
  s->source_ = std::move(*source);
  const int cpus = s->source_->num_cpus();
  for (int cpu = 0; cpu < cpus; cpu++) {
    s->cpu_writers_.push_back(producer->CreateTraceWriter(static_cast<buffer::WriterID>(1 + cpu)));
  }
  s->drops_seen_.assign(static_cast<size_t>(cpus), 0);
  s->lost_pending_.assign(static_cast<size_t>(cpus), false);
  return s;
}

BpfDataSource::~BpfDataSource() { Stop(); }

absl::Status BpfDataSource::Start() {
  if (absl::Status st = source_->Attach(); !st.ok()) return st;
  started_ = true;
  thread_ = std::thread([this] { ConsumerLoop(); });
  return absl::OkStatus();
}

void BpfDataSource::TellTracker(absl::Span<const bpf::RecordView> records) {
  DescriptorTracker* t = config_.tracker;
  auto comm = [](const char* c) { return std::string_view(c, strnlen(c, RS_TASK_COMM_LEN)); };
  for (const bpf::RecordView& r : records) {
    rs_event_header h;
    if (r.size < sizeof(h)) continue;
    std::memcpy(&h, r.data, sizeof(h));
    switch (h.type) {
      case RS_EV_PROCESS_FORK: {
        rs_process_fork e;
        if (r.size < sizeof(e)) break;
        std::memcpy(&e, r.data, sizeof(e));
        t->OnFork(h.ts_ns, e.parent_pid, e.parent_tgid, e.child_pid, e.child_tgid,
                  comm(e.child_comm));
        break;
      }
      case RS_EV_PROCESS_EXEC: {
        rs_process_exec e;
        if (r.size < sizeof(e)) break;
        std::memcpy(&e, r.data, sizeof(e));
        t->OnExec(
            h.ts_ns, e.pid, e.tgid,
            std::string_view(e.filename, std::min<size_t>(e.filename_len, RS_FILENAME_LEN - 1)),
            std::string_view(e.argv, std::min<size_t>(e.argv_len, RS_ARGV_LEN)), comm(e.comm),
            e.ppid, e.uid);
        break;
      }
      case RS_EV_PROCESS_EXIT: {
        rs_process_exit e;
        if (r.size < sizeof(e)) break;
        std::memcpy(&e, r.data, sizeof(e));
        t->OnExit(h.ts_ns, e.pid, e.tgid, e.group_dead != 0);
        break;
      }
      case RS_EV_TASK_RENAME: {
        rs_task_rename e;
        if (r.size < sizeof(e)) break;
        std::memcpy(&e, r.data, sizeof(e));
        t->OnRename(h.ts_ns, e.pid, comm(e.new_comm));
        break;
      }
      default:
        break;
    }
  }
}

void BpfDataSource::OnBatch(uint32_t cpu, absl::Span<const bpf::RecordView> records) {
  if (cpu >= cpu_writers_.size()) return;
  if (config_.tracker != nullptr) TellTracker(records);
  bundles_.WriteBundle(cpu_writers_[cpu].get(), cpu, records, lost_pending_[cpu]);
  lost_pending_[cpu] = false;
  events_.store(bundles_.total_events(), std::memory_order_relaxed);
}

uint64_t BpfDataSource::TotalDropsOfCpu(const std::vector<std::vector<uint64_t>>& per_type,
                                        uint32_t cpu) const {
  uint64_t n = 0;
  for (const std::vector<uint64_t>& t : per_type) n += cpu < t.size() ? t[cpu] : 0;
  return n;
}

void BpfDataSource::DrainOnce(int timeout_ms) {
  // Drops since the last look mark the next bundle of their CPU.
  std::vector<std::vector<uint64_t>> per_type;
  for (uint32_t type = 1; type < RS_EV_MAX; type++) {
    per_type.push_back(source_->drops_per_cpu(type));
  }
  for (uint32_t cpu = 0; cpu < drops_seen_.size(); cpu++) {
    const uint64_t d = TotalDropsOfCpu(per_type, cpu);
    if (d != drops_seen_[cpu]) {
      drops_seen_[cpu] = d;
      lost_pending_[cpu] = true;
    }
  }
  auto on_batch = [this](uint32_t cpu, absl::Span<const bpf::RecordView> records) {
    OnBatch(cpu, records);
  };
  if (timeout_ms > 0) {
    source_->Poll(timeout_ms, on_batch).IgnoreError();  // A failed wait is retried next round.
  } else {
    source_->Drain(on_batch);
  }
}

void BpfDataSource::ConsumerLoop() {
  const int period = static_cast<int>(config_.drain_period_ms > 0 ? config_.drain_period_ms : 100);
  while (!stop_.load(std::memory_order_acquire)) DrainOnce(period);
}

void BpfDataSource::Stop() {
  if (stopped_ || source_ == nullptr) return;
  stopped_ = true;
  stop_.store(true, std::memory_order_release);
  source_->Wake();
  if (thread_.joinable()) thread_.join();
  if (started_) {
    source_->Detach();
    DrainOnce(0);
  }
  for (auto& w : cpu_writers_) w->Flush();
}

std::vector<BpfDataSource::Loss> BpfDataSource::Losses() const {
  std::vector<Loss> out;
  for (uint32_t type = 1; type < RS_EV_MAX; type++) {
    const std::vector<uint64_t> per_cpu = source_->drops_per_cpu(type);
    for (uint32_t cpu = 0; cpu < per_cpu.size(); cpu++) {
      if (per_cpu[cpu] != 0) out.push_back(Loss{cpu, EventName(type), per_cpu[cpu]});
    }
  }
  // Runs the kernel skipped are not per CPU: reported once, on CPU 0.
  uint64_t missed = 0;
  for (const bpf::EventSource::ProgramStats& p : source_->program_stats()) missed += p.missed;
  if (missed != 0) out.push_back(Loss{0, "bpf_missed_runs", missed});
  return out;
}

}  // namespace ringside::agent
