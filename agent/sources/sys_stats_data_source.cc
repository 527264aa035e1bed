#include "agent/sources/sys_stats_data_source.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/sources/cpu_budget.h"
#include "agent/sources/proc_counters.h"
#include "base/boottime.h"
#include "base/status.h"
#include "ringside/trace/sys_stats.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::SysStats;

// The pressure files and the PsiResource values of their two lines.
struct PsiFile {
  const char* name;
  int some;
  int full;
};
constexpr PsiFile kPsiFiles[] = {
    {"cpu", SysStats::PsiSample::PSI_RESOURCE_CPU_SOME, SysStats::PsiSample::PSI_RESOURCE_CPU_FULL},
    {"io", SysStats::PsiSample::PSI_RESOURCE_IO_SOME, SysStats::PsiSample::PSI_RESOURCE_IO_FULL},
    {"memory", SysStats::PsiSample::PSI_RESOURCE_MEMORY_SOME,
     SysStats::PsiSample::PSI_RESOURCE_MEMORY_FULL},
};

// /proc files are read again from their start with pread: no seek, and the
// fd opened once.
constexpr size_t kReadStep = 16 * 1024;
// /proc/stat grows with the CPUs and interrupts (a line each); far past any
// machine's.
constexpr size_t kMaxFileBytes = 4 * 1024 * 1024;

}  // namespace

SysStatsDataSource::SysStatsDataSource(Config config, ProducerBuffer* producer)
    : PolledSource(producer),
      config_(std::move(config)),
      ns_per_tick_(1000000000u / static_cast<uint64_t>(std::max(1L, sysconf(_SC_CLK_TCK)))) {}

absl::StatusOr<std::unique_ptr<SysStatsDataSource>> SysStatsDataSource::Create(
    Config config, ProducerBuffer* producer) {
  std::unique_ptr<SysStatsDataSource> ds(new SysStatsDataSource(std::move(config), producer));
  const Config& c = ds->config_;
  auto open_file = [&](uint32_t period, const std::string& file, const char* field) {
    if (period == 0) return base::ScopedFd();
    const std::string path = absl::StrCat(c.proc, "/", file);
    base::ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      ds->warnings_.push_back(
          absl::StrCat(field, ": cannot open ", path, " (", std::strerror(errno), ")"));
    }
    return fd;
  };
  ds->meminfo_ = open_file(c.meminfo_period_ms, "meminfo", "meminfo_period_ms");
  ds->vmstat_ = open_file(c.vmstat_period_ms, "vmstat", "vmstat_period_ms");
  ds->stat_ = open_file(c.stat_period_ms, "stat", "stat_period_ms");
  if (c.psi_period_ms != 0 && access(absl::StrCat(c.proc, "/pressure").c_str(), F_OK) != 0) {
    ds->warnings_.push_back(
        absl::StrCat("psi_period_ms: no ", c.proc,
                     "/pressure: a kernel without CONFIG_PSI, or one built with "
                     "CONFIG_PSI_DEFAULT_DISABLED (Debian's, RHEL's) and booted without psi=1"));
  } else if (c.psi_period_ms != 0) {
    for (const PsiFile& f : kPsiFiles) {
      base::ScopedFd fd =
          open_file(c.psi_period_ms, absl::StrCat("pressure/", f.name), "psi_period_ms");
      if (fd.valid()) ds->psi_.push_back(Psi{f.some, f.full, std::move(fd)});
    }
  }
  if (!ds->meminfo_.valid() && !ds->vmstat_.valid() && !ds->stat_.valid() && ds->psi_.empty()) {
    return absl::FailedPreconditionError(
        ds->warnings_.empty() ? "no counter has a period (sys_stats_config)"
                              : absl::StrCat("no counter can be read: ", ds->warnings_.front()));
  }
  if (absl::Status st = ds->Init(); !st.ok()) return st;
  return ds;
}

uint32_t SysStatsDataSource::PeriodMs(Kind kind) const {
  switch (kind) {
    case kMeminfo:
      return meminfo_.valid() ? config_.meminfo_period_ms : 0;
    case kVmstat:
      return vmstat_.valid() ? config_.vmstat_period_ms : 0;
    case kStat:
      return stat_.valid() ? config_.stat_period_ms : 0;
    case kPsi:
      return psi_.empty() ? 0 : config_.psi_period_ms;
    case kNumKinds:
      break;
  }
  return 0;
}

absl::Time SysStatsDataSource::NextDue() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (int k = 0; k < kNumKinds; k++) {
    if (PeriodMs(static_cast<Kind>(k)) != 0) earliest = std::min(earliest, next_[k]);
  }
  return earliest;
}

bool SysStatsDataSource::Poll(absl::Time now, bool all) {
  unsigned due = 0;
  for (int k = 0; k < kNumKinds; k++) {
    const uint32_t period = PeriodMs(static_cast<Kind>(k));
    if (period == 0 || (!all && next_[k] > now)) continue;
    due |= 1u << k;
    // The next one a period after this one was due, not after now: the
    // samples keep their pace, and a late wake-up does not shift them all.
    next_[k] += absl::Milliseconds(period);
    if (next_[k] <= now) next_[k] = now + absl::Milliseconds(period);
  }
  if (due != 0) Sample(due);
  return due != 0;
}

bool SysStatsDataSource::ReadAgain(int fd) {
  text_.clear();
  while (text_.size() < kMaxFileBytes) {
    const size_t at = text_.size();
    text_.resize(at + kReadStep);
    const ssize_t n = pread(fd, text_.data() + at, kReadStep, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) {
      text_.resize(at);
      continue;
    }
    if (n < 0) {
      text_.clear();
      read_errors_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    text_.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
  }
  return true;
}

void SysStatsDataSource::Sample(unsigned due) {
  poller_state_.Check();
  auto packet = writer().NewTracePacket();
  packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, base::BoottimeNs());
  ProtoMessage* stats = packet->BeginNested(trace::TracePacket::kSysStatsFieldNumber);
  auto counters = [&](uint32_t field, const std::vector<ProcCounter>& values) {
    for (const ProcCounter& c : values) {
      ProtoMessage* m = stats->BeginNested(field);
      m->AppendVarInt(1, static_cast<uint64_t>(c.key));
      m->AppendVarInt(2, c.value);
      m->EndNested();
    }
  };
  if ((due & (1u << kMeminfo)) && ReadAgain(meminfo_.get())) {
    counters(SysStats::kMeminfoFieldNumber, ParseMeminfo(text_, config_.meminfo_counters));
  }
  if ((due & (1u << kVmstat)) && ReadAgain(vmstat_.get())) {
    counters(SysStats::kVmstatFieldNumber, ParseVmstat(text_, config_.vmstat_counters));
  }
  if ((due & (1u << kStat)) && ReadAgain(stat_.get())) SampleStat(stats);
  if (due & (1u << kPsi)) SamplePsi(stats);
  stats->AppendVarInt(SysStats::kCollectionEndTimestampFieldNumber, base::BoottimeNs());
  stats->EndNested();
}

void SysStatsDataSource::SampleStat(ProtoMessage* stats) {
  const ProcStat stat = ParseProcStat(text_, ns_per_tick_);
  using CT = SysStats::CpuTimes;
  for (const CpuTimes& c : config_.cpu_times ? stat.cpus : std::vector<CpuTimes>()) {
    ProtoMessage* m = stats->BeginNested(SysStats::kCpuStatFieldNumber);
    m->AppendVarInt(CT::kCpuIdFieldNumber, c.cpu);
    m->AppendVarInt(CT::kUserNsFieldNumber, c.user_ns);
    m->AppendVarInt(CT::kUserNiceNsFieldNumber, c.nice_ns);
    m->AppendVarInt(CT::kSystemModeNsFieldNumber, c.system_ns);
    m->AppendVarInt(CT::kIdleNsFieldNumber, c.idle_ns);
    m->AppendVarInt(CT::kIoWaitNsFieldNumber, c.iowait_ns);
    m->AppendVarInt(CT::kIrqNsFieldNumber, c.irq_ns);
    m->AppendVarInt(CT::kSoftirqNsFieldNumber, c.softirq_ns);
    m->AppendVarInt(CT::kStealNsFieldNumber, c.steal_ns);
    m->EndNested();
  }
  if (config_.forks && stat.forks.has_value()) {
    stats->AppendVarInt(SysStats::kNumForksFieldNumber, *stat.forks);
  }
}

void SysStatsDataSource::SamplePsi(ProtoMessage* stats) {
  for (const Psi& p : psi_) {
    if (!ReadAgain(p.fd.get())) continue;
    const Pressure pressure = ParsePressure(text_);
    for (const auto& [line, resource] :
         {std::pair{pressure.some, p.some_resource}, std::pair{pressure.full, p.full_resource}}) {
      if (!line.has_value()) continue;
      ProtoMessage* m = stats->BeginNested(SysStats::kPsiFieldNumber);
      m->AppendVarInt(SysStats::PsiSample::kResourceFieldNumber, static_cast<uint64_t>(resource));
      m->AppendVarInt(SysStats::PsiSample::kTotalNsFieldNumber, line->total_us * 1000);
      m->EndNested();
    }
  }
}

}  // namespace ringside::agent
