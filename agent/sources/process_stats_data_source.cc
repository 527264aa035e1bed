#include "agent/sources/process_stats_data_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/sources/proc_counters.h"
#include "agent/sources/system_frame_namer.h"
#include "base/boottime.h"
#include "base/dir_stream.h"
#include "base/status.h"
#include "ringside/trace/process_stats.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::ProcessStats;

// How many processes' statm a source keeps open: a quarter of the files
// this process may open, so that the rest of the agent keeps room.
size_t MaxOpenStatm() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  constexpr rlim_t kMostEver = 1 << 16;
  return static_cast<size_t>(std::min(limit.rlim_cur, kMostEver) / 4);
}

constexpr char kReadingProc[] =
    "reading each process's /proc/PID/statm instead of one pass of a BPF task iterator: ";

}  // namespace

ProcessStatsDataSource::ProcessStatsDataSource(Config config, ProducerBuffer* producer)
    : PolledSource(producer),
      config_(std::move(config)),
      page_kb_(std::max<uint64_t>(1, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024)),
      max_open_statm_(MaxOpenStatm()) {}

absl::StatusOr<std::unique_ptr<ProcessStatsDataSource>> ProcessStatsDataSource::Create(
    Config config, ProducerBuffer* producer) {
  std::unique_ptr<ProcessStatsDataSource> ds(
      new ProcessStatsDataSource(std::move(config), producer));
  ds->proc_ = base::ScopedFd(open(ds->config_.proc.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!ds->proc_.valid()) return base::ErrnoToStatus(errno, ds->config_.proc);
  // The iterator's tgids are the kernel's: only a /proc that numbers
  // tasks so can name them (a container without the host's PID namespace
  // has its own numbers, and its own processes alone).
  if (ds->config_.bpf && ds->config_.proc == "/proc" && ProcNumbersPidsAsTheKernelDoes("/proc")) {
    absl::StatusOr<std::unique_ptr<bpf::ProcessMemory>> iterator = bpf::ProcessMemory::Load();
    if (iterator.ok()) {
      ds->iterator_ = *std::move(iterator);
    } else {
      ds->warnings_.push_back(absl::StrCat(kReadingProc, iterator.status().message()));
    }
  }
  if (absl::Status st = ds->Init(); !st.ok()) return st;
  return ds;
}

bool ProcessStatsDataSource::Poll(absl::Time now, bool all) {
  if (!all && next_ > now) return false;
  next_ += absl::Milliseconds(config_.poll_ms);
  if (next_ <= now) next_ = now + absl::Milliseconds(config_.poll_ms);
  Sample();
  return true;
}

bool ProcessStatsDataSource::ReadOf(int dir, const char* file) {
  base::ScopedFd fd(openat(dir, file, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  text_.resize(4096);
  const ssize_t n = read(fd.get(), text_.data(), text_.size());
  if (n < 0) return false;
  text_.resize(static_cast<size_t>(n));
  return true;
}

void ProcessStatsDataSource::Sample() {
  poller_state_.Check();
  auto packet = writer().NewTracePacket();
  packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, base::BoottimeNs());
  ProtoMessage* stats = packet->BeginNested(trace::TracePacket::kProcessStatsFieldNumber);
  if (iterator_ == nullptr || !SampleByIterator(stats)) SampleByProc(stats);
  stats->AppendVarInt(ProcessStats::kCollectionEndTimestampFieldNumber, base::BoottimeNs());
  stats->EndNested();
}

bool ProcessStatsDataSource::SampleByIterator(ProtoMessage* stats) {
  // A pass that fails (the system out of memory, say) leaves this sample
  // to /proc; the next tries the iterator again (a failed pass costs one
  // system call).
  if (!iterator_->Read(&listed_).ok()) return false;
  // What a /proc pass kept (after a failed pass) is not needed now.
  statm_.clear();
  no_memory_.clear();
  iterator_passes_.fetch_add(1, std::memory_order_relaxed);
  seen_.fetch_add(listed_.size(), std::memory_order_relaxed);
  // What is written comes from the pass itself: reading each one's status
  // and oom_score_adj from /proc after it (its directory and two files
  // opened, read and closed) took a pass beside 100 processes of 20 MiB
  // from 49 us to 2.2 ms on a 2-CPU VM (sys_stats_benchmark).
  bool init_listed = false;
  for (const bpf::ProcessMemory::Process& p : listed_) {
    init_listed |= p.tgid == 1;
    if (p.resident_pages * page_kb_ < config_.min_rss_kb) continue;
    ProcessMemory m;
    m.vm_size_kb = p.total_vm * page_kb_;
    m.vm_rss_kb = p.resident_pages * page_kb_;
    m.rss_anon_kb = p.anon_pages * page_kb_;
    m.rss_file_kb = p.file_pages * page_kb_;
    m.rss_shmem_kb = p.shmem_pages * page_kb_;
    m.vm_swap_kb = p.swap_entries * page_kb_;
    m.vm_locked_kb = p.locked_vm * page_kb_;
    m.vm_hwm_kb = std::max(p.hiwater_rss, p.resident_pages) * page_kb_;
    WriteMemory(stats, p.tgid, m, p.oom_score_adj);
  }
  // The iterator of some kernels never visits pid 1 (seen on a 6.18 VM:
  // every other process listed, init not): its statm, then.
  if (!init_listed && ReadOf(proc_.get(), "1/statm")) {
    const std::optional<uint64_t> pages = ResidentPagesOfStatm(text_);
    if (pages.has_value() && *pages * page_kb_ >= config_.min_rss_kb) WriteProcess(stats, 1, "1");
  }
  return true;
}

void ProcessStatsDataSource::SampleByProc(ProtoMessage* stats) {
  base::DirStream dir = base::OpenDirStream(proc_.get());
  if (dir == nullptr) return;
  while (const dirent* e = readdir(dir.get())) {
    int32_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    // A kernel thread (or a task already dead) found so at an earlier poll:
    // the same directory, so the same task, still without memory.
    if (const auto it = no_memory_.find(pid); it != no_memory_.end() && it->second == e->d_ino) {
      no_memory_next_.emplace(pid, e->d_ino);
      continue;
    }
    // statm only filters (most pids are kernel threads, with no memory):
    // read by path, it costs one open where the process's directory costs
    // two. What is written is read through the directory, all of one
    // process even if its pid is reused meanwhile.
    if (!ReadStatm(pid, e->d_name, e->d_ino)) continue;
    seen_.fetch_add(1, std::memory_order_relaxed);
    if (absl::StartsWith(text_, "0 ")) {  // No address space at all.
      no_memory_next_.emplace(pid, e->d_ino);
      statm_next_.erase(pid);  // Not read again: its file need not stay open.
      continue;
    }
    const std::optional<uint64_t> pages = ResidentPagesOfStatm(text_);
    if (!pages.has_value() || *pages * page_kb_ < config_.min_rss_kb) continue;
    WriteProcess(stats, pid, e->d_name);
  }
  // Those no longer listed are gone: their ids may name new tasks.
  no_memory_.swap(no_memory_next_);
  no_memory_next_.clear();
  statm_.swap(statm_next_);
  statm_next_.clear();  // Closes the statm of processes gone.
}

bool ProcessStatsDataSource::WriteProcess(ProtoMessage* stats, int32_t pid, const char* name) {
  base::ScopedFd pid_dir(openat(proc_.get(), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!pid_dir.valid() || !ReadOf(pid_dir.get(), "status")) return false;
  const ProcessMemory m = ParseProcessStatus(text_);
  int64_t oom_score_adj = 0;
  const bool adj = ReadOf(pid_dir.get(), "oom_score_adj") &&
                   absl::SimpleAtoi(absl::StripAsciiWhitespace(text_), &oom_score_adj);
  WriteMemory(stats, pid, m, adj ? std::optional<int64_t>(oom_score_adj) : std::nullopt);
  return true;
}

void ProcessStatsDataSource::WriteMemory(ProtoMessage* stats, int32_t pid, const ProcessMemory& m,
                                         std::optional<int64_t> oom_score_adj) {
  using P = ProcessStats::Process;
  ProtoMessage* p = stats->BeginNested(ProcessStats::kProcessesFieldNumber);
  p->AppendVarInt(P::kPidFieldNumber, static_cast<uint64_t>(pid));
  p->AppendVarInt(P::kVmSizeKbFieldNumber, m.vm_size_kb);
  p->AppendVarInt(P::kVmRssKbFieldNumber, m.vm_rss_kb);
  p->AppendVarInt(P::kRssAnonKbFieldNumber, m.rss_anon_kb);
  p->AppendVarInt(P::kRssFileKbFieldNumber, m.rss_file_kb);
  p->AppendVarInt(P::kRssShmemKbFieldNumber, m.rss_shmem_kb);
  p->AppendVarInt(P::kVmSwapKbFieldNumber, m.vm_swap_kb);
  p->AppendVarInt(P::kVmLockedKbFieldNumber, m.vm_locked_kb);
  p->AppendVarInt(P::kVmHwmKbFieldNumber, m.vm_hwm_kb);
  if (oom_score_adj.has_value()) p->AppendInt(P::kOomScoreAdjFieldNumber, *oom_score_adj);
  p->EndNested();
  written_.fetch_add(1, std::memory_order_relaxed);
}

bool ProcessStatsDataSource::PreadText(int fd) {
  text_.resize(4096);
  const ssize_t n = pread(fd, text_.data(), text_.size(), 0);
  if (n <= 0) return false;
  text_.resize(static_cast<size_t>(n));
  return true;
}

bool ProcessStatsDataSource::ReadStatm(int32_t pid, const char* name, ino_t ino) {
  OpenStatm open_statm;
  if (const auto it = statm_.find(pid); it != statm_.end() && it->second.ino == ino) {
    open_statm = std::move(it->second);
  }
  // A read of a statm kept open fails once its task is gone.
  if (!open_statm.fd.valid() || !PreadText(open_statm.fd.get())) {
    statm_path_.assign(name).append("/statm");
    open_statm = {ino,
                  base::ScopedFd(openat(proc_.get(), statm_path_.c_str(), O_RDONLY | O_CLOEXEC))};
    if (!open_statm.fd.valid() || !PreadText(open_statm.fd.get())) return false;
  }
  if (statm_next_.size() < max_open_statm_) statm_next_.emplace(pid, std::move(open_statm));
  return true;
}

ProcessStatsDataSource::Stats ProcessStatsDataSource::stats() const {
  return {polls(), written_.load(std::memory_order_relaxed), seen_.load(std::memory_order_relaxed),
          iterator_passes_.load(std::memory_order_relaxed)};
}

}  // namespace ringside::agent
