#include "agent/recording.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/version.h"
#include "agent/wire_format.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

// Packets the recorder writes itself go on this sequence, the durable
// descriptors on the next; data sources get 3, 4, ...
constexpr uint32_t kServiceSequenceId = 1;
constexpr uint32_t kDescriptorSequenceId = 2;

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

trace::TracePacket ScanProcesses() {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ClockNs(CLOCK_BOOTTIME)));
  trace::ProcessTree* tree = packet.mutable_process_tree();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return packet;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    const std::string dir = absl::StrCat("/proc/", pid);
    const std::string status = ReadSmallFile(dir + "/status");
    if (status.empty()) continue;  // Gone meanwhile.
    trace::ProcessTree::Process* p = tree->add_processes();
    p->set_pid(pid);
    std::string comm;
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      if (absl::ConsumePrefix(&line, "PPid:")) {
        int ppid = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &ppid)) p->set_ppid(ppid);
      } else if (absl::ConsumePrefix(&line, "Uid:")) {
        int uid = 0;
        std::vector<std::string> ids = absl::StrSplit(absl::StripAsciiWhitespace(line), '\t');
        if (!ids.empty() && absl::SimpleAtoi(ids[0], &uid)) p->set_uid(uid);
      } else if (absl::ConsumePrefix(&line, "Name:")) {
        comm = std::string(absl::StripAsciiWhitespace(line));
      }
    }
    const std::string cmdline = ReadSmallFile(dir + "/cmdline");
    if (cmdline.empty()) {
      p->add_cmdline(comm);  // Kernel threads: the comm, as Perfetto does.
    } else {
      for (absl::string_view arg : absl::StrSplit(cmdline, '\0', absl::SkipEmpty())) {
        p->add_cmdline(std::string(arg));
      }
    }
    DIR* tasks = opendir((dir + "/task").c_str());
    if (tasks == nullptr) continue;
    while (dirent* t = readdir(tasks)) {
      int tid = 0;
      if (!absl::SimpleAtoi(t->d_name, &tid)) continue;
      trace::ProcessTree::Thread* thread = tree->add_threads();
      thread->set_tid(tid);
      thread->set_tgid(pid);
      thread->set_name(std::string(absl::StripTrailingAsciiWhitespace(
          ReadSmallFile(absl::StrCat(dir, "/task/", tid, "/comm")))));
    }
    closedir(tasks);
  }
  closedir(proc);
  tree->set_collection_end_timestamp(static_cast<uint64_t>(ClockNs(CLOCK_BOOTTIME)));
  return packet;
}

absl::StatusOr<std::unique_ptr<Recording>> Recording::Create(const config::TraceConfig& config,
                                                             const std::string& output_path) {
  // The finished file holds at most what the buffers hold, re-framed
  // (a few bytes more per packet), the durable descriptors and two /proc
  // scans: room for all of it is reserved before recording starts.
  uint64_t reserve = 0;
  for (const auto& b : config.buffers()) reserve += uint64_t{b.size_kb()} * 1024;
  reserve += reserve / 4 + uint64_t{config.durable_buffer_size_kb()} * 2048 + (8 << 20);
  absl::StatusOr<std::unique_ptr<OutputFile>> output = OutputFile::Open(
      output_path,
      config.write_into_file() ? OutputFile::Mode::kStreaming : OutputFile::Mode::kWholeFile,
      config.write_into_file() ? 0 : reserve);
  if (!output.ok()) return output.status();
  std::unique_ptr<Recording> r(new Recording(config, std::move(*output)));
  if (!r->output_->warning().empty()) r->warnings_.push_back(r->output_->warning());
  {
    absl::MutexLock lock(&r->mu_);
    for (const auto& b : config.buffers()) {
      auto policy = b.fill_policy() == config::TraceConfig::BufferConfig::DISCARD
                        ? buffer::TraceBuffer::OverwritePolicy::kDiscard
                        : buffer::TraceBuffer::OverwritePolicy::kOverwrite;
      auto tb = buffer::TraceBuffer::Create(size_t{b.size_kb()} * 1024, policy);
      if (tb == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate a buffer of ", b.size_kb(), " KiB"));
      }
      r->buffers_.push_back(std::move(tb));
    }
  }
  if (config.durable_buffer_size_kb() > 0 && !config.buffers().empty()) {
    // Beside the first buffer, which is read first: descriptors come
    // before any event of any buffer.
    absl::MutexLock lock(&r->mu_);
    r->buffers_[0]->SetDurableStore(std::make_unique<buffer::DurableStore>(
        size_t{config.durable_buffer_size_kb()} * 1024, r->buffers_[0]->size()));
    r->tracker_ = std::make_unique<DescriptorTracker>();
  }
  buffer::ProducerID next_producer = 1;
  auto new_source = [&](const config::DataSourceConfig& c) {
    Source source;
    source.name = c.name();
    source.target_buffer = c.target_buffer();
    source.producer = std::make_unique<ProducerBuffer>(
        next_producer++, buffer::ClientIdentity{getuid(), getpid()}, ProducerBuffer::Options{});
    return source;
  };
  // BPF first: whether it loads decides the ftrace sources' fallback events.
  int bpf_loaded = 0;
  for (const auto& ds : config.data_sources()) {
    const config::DataSourceConfig& c = ds.config();
    if (c.name() != "linux.bpf") continue;
    Source source = new_source(c);
    const config::BpfConfig& bc = c.bpf_config();
    BpfDataSource::Config cfg;
    cfg.source.sched = bc.sched();
    cfg.source.process = bc.process();
    cfg.source.incidents = bc.incidents();
    if (bc.ring_size_kb() > 0)
      cfg.source.ring_size_per_cpu = size_t{bc.ring_size_kb()} * 1024;
    else
      cfg.source.ring_size_per_cpu = size_t{4096} * 1024;
    cfg.source.filters.tgids.assign(bc.filter_tgid().begin(), bc.filter_tgid().end());
    cfg.source.filters.cgroup_id = bc.filter_cgroup_id();
    cfg.source.filters.max_prio = bc.has_filter_max_prio() ? bc.filter_max_prio() : -1;
    if (bc.drain_period_ms() > 0) cfg.drain_period_ms = bc.drain_period_ms();
    cfg.tracker = r->tracker_.get();
    absl::StatusOr<std::unique_ptr<BpfDataSource>> b =
        BpfDataSource::Create(cfg, source.producer.get());
    if (!b.ok()) {
      r->warnings_.push_back(absl::StrCat("linux.bpf disabled: ", b.status().message()));
      continue;
    }
    for (const std::string& p : (*b)->skipped_programs()) {
      r->warnings_.push_back(absl::StrCat("linux.bpf: this kernel cannot attach ", p));
    }
    source.bpf = std::move(*b);
    r->sources_.push_back(std::move(source));
    bpf_loaded++;
  }
  std::optional<absl::StatusOr<ftrace::Tracefs>> tracefs;
  for (const auto& ds : config.data_sources()) {
    const config::DataSourceConfig& c = ds.config();
    if (c.name() != "linux.ftrace") continue;
    const bool fallback = bpf_loaded == 0 && c.ftrace_config().bpf_fallback_events_size() > 0;
    // Only fallback events, and BPF is there: nothing for ftrace to do.
    if (c.ftrace_config().ftrace_events_size() == 0 && !fallback) continue;
    if (!tracefs) {
      tracefs = ftrace::Tracefs::Open();
      if (tracefs->ok()) r->tracefs_ = **tracefs;
    }
    if (!tracefs->ok()) {
      r->warnings_.push_back(absl::StrCat("linux.ftrace disabled: ", tracefs->status().message()));
      continue;
    }
    Source source = new_source(c);
    FtraceDataSource::Config fc;
    fc.tracker = r->tracker_.get();
    fc.instance_name = absl::StrCat("record", next_producer - 1);
    for (const std::string& e : c.ftrace_config().ftrace_events()) {
      std::string filter;
      for (const auto& f : c.ftrace_config().event_filters()) {
        if (f.event() == e) filter = f.filter();
      }
      fc.events.push_back({e, filter});
    }
    if (fallback) {
      for (const std::string& e : c.ftrace_config().bpf_fallback_events()) {
        fc.events.push_back({e, ""});
      }
      r->warnings_.push_back(absl::StrCat(
          "linux.ftrace: recording ", absl::StrJoin(c.ftrace_config().bpf_fallback_events(), ", "),
          " with ftrace in place of BPF"));
    }
    if (c.ftrace_config().buffer_size_kb() > 0)
      fc.buffer_size_kb = c.ftrace_config().buffer_size_kb();
    if (c.ftrace_config().drain_period_ms() > 0)
      fc.drain_period_ms = c.ftrace_config().drain_period_ms();
    if (c.ftrace_config().drain_buffer_percent() > 0) {
      fc.buffer_percent = c.ftrace_config().drain_buffer_percent();
    }
    if (c.ftrace_config().has_compact_sched()) {
      fc.compact_sched = c.ftrace_config().compact_sched().enabled();
    }
    absl::StatusOr<std::unique_ptr<FtraceDataSource>> f =
        FtraceDataSource::Create(**tracefs, fc, source.producer.get());
    if (!f.ok()) {
      r->warnings_.push_back(absl::StrCat("linux.ftrace disabled: ", f.status().message()));
      continue;
    }
    for (const std::string& e : (*f)->enable_result().unknown) {
      r->warnings_.push_back(absl::StrCat("linux.ftrace: this kernel has no event ", e));
    }
    for (const auto& [e, s] : (*f)->enable_result().failed) {
      r->warnings_.push_back(absl::StrCat("linux.ftrace: ", s.message()));
    }
    source.ftrace = std::move(*f);
    r->sources_.push_back(std::move(source));
  }
  return r;
}

Recording::~Recording() {
  stop_.store(true);
  if (owner_.joinable()) owner_.join();
}

TracePacket Recording::ClockSnapshot() const {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ClockNs(CLOCK_BOOTTIME)));
  trace::ClockSnapshot* s = packet.mutable_clock_snapshot();
  for (auto [id, clock] : {std::pair{trace::ClockSnapshot::Clock::BOOTTIME, CLOCK_BOOTTIME},
                           std::pair{trace::ClockSnapshot::Clock::MONOTONIC, CLOCK_MONOTONIC},
                           std::pair{trace::ClockSnapshot::Clock::REALTIME, CLOCK_REALTIME}}) {
    trace::ClockSnapshot::Clock* c = s->add_clocks();
    c->set_clock_id(id);
    c->set_timestamp(static_cast<uint64_t>(ClockNs(clock)));
  }
  s->set_primary_trace_clock(trace::BUILTIN_CLOCK_BOOTTIME);
  return packet;
}

absl::Status Recording::Start() {
  start_boottime_ns_ = ClockNs(CLOCK_BOOTTIME);
  start_clocks_ = ClockSnapshot();
  for (Source& s : sources_) {
    if (s.bpf != nullptr) {
      if (absl::Status st = s.bpf->Start(); !st.ok()) {
        warnings_.push_back(absl::StrCat("linux.bpf did not start: ", st.message()));
        s.bpf.reset();
      }
    }
    if (s.ftrace != nullptr) {
      if (absl::Status st = s.ftrace->Start(); !st.ok()) {
        warnings_.push_back(absl::StrCat("linux.ftrace did not start: ", st.message()));
        s.ftrace.reset();
      }
    }
  }
  bool recording_kernel_events = false;
  for (const Source& s : sources_) {
    recording_kernel_events |= s.bpf != nullptr || s.ftrace != nullptr;
  }
  if (!recording_kernel_events) {
    warnings_.push_back(
        "no kernel data source is running: recording processes and threads from /proc only");
  }
  // Scanned once the sources run, so that no process can start unseen
  // between the scan and the first event; one that starts meanwhile is
  // named by both, the scan's (newer) entry winning.
  start_processes_ = ScanProcesses();
  if (tracker_ != nullptr) tracker_->Seed(start_processes_);
  if (streaming()) {
    std::string header;
    AppendHeader(&header);
    DrainAll();  // The /proc scan's descriptors, read first, from the start.
    {
      absl::MutexLock lock(&mu_);
      AppendBufferPackets(&header);
    }
    if (absl::Status st = WriteToStream(header); !st.ok()) return st;
  }
  owner_ = std::thread([this] { OwnerLoop(); });
  return absl::OkStatus();
}

absl::Status Recording::WriteToStream(const std::string& bytes) {
  if (absl::Status st = output_->Append(bytes); !st.ok()) return st;
  file_bytes_.store(output_->bytes_written());
  if (config_.max_file_size_bytes() > 0 && file_bytes_.load() >= config_.max_file_size_bytes()) {
    file_limit_reached_.store(true);
  }
  return absl::OkStatus();
}

void Recording::StreamBuffers() {
  if (!stream_pending_.empty()) {
    if (!WriteToStream(stream_pending_).ok()) return;
    stream_pending_.clear();
    Notice(absl::StrCat("writing ", output_->display_name(),
                        " again; nothing read from the buffers was lost"));
  }
  std::string out;
  {
    absl::MutexLock lock(&mu_);
    AppendBufferPackets(&out);
  }
  if (out.empty()) return;
  if (absl::Status st = WriteToStream(out); !st.ok()) {
    Notice(absl::StrCat(st.message(),
                        "; the file keeps every packet written before, the buffers keep "
                        "recording, and writing is retried each file_write_period_ms"));
    stream_pending_ = std::move(out);
  }
}

void Recording::Notice(std::string message) {
  absl::MutexLock lock(&notices_mu_);
  notices_.push_back(std::move(message));
}

std::vector<std::string> Recording::TakeNotices() {
  absl::MutexLock lock(&notices_mu_);
  return std::exchange(notices_, {});
}

void Recording::DrainAll() {
  // With the durable buffer, each drain starts with a flush: its compaction
  // needs to know that what was written before an exit is in the rings.
  if (tracker_ != nullptr) {
    for (Source& s : sources_) s.producer->ScrapeWriters();
  }
  absl::MutexLock lock(&mu_);
  for (Source& s : sources_) s.producer->DrainInto(buffers_[s.target_buffer].get());
  if (tracker_ != nullptr) {
    buffer::DurableStore* store = buffers_[0]->durable();
    tracker_->ApplyTo(store);
    store->Drained(buffers_[0]->stats().bytes_written);
  }
}

void Recording::OwnerLoop() {
  const int64_t flush_ns = int64_t{config_.flush_period_ms()} * 1000000;
  const int64_t write_ns =
      int64_t{config_.file_write_period_ms() > 0 ? config_.file_write_period_ms() : 5000} * 1000000;
  int64_t last_flush = ClockNs(CLOCK_MONOTONIC), last_write = last_flush;
  while (!stop_.load()) {
    const int64_t now = ClockNs(CLOCK_MONOTONIC);
    if (flush_ns > 0 && now - last_flush >= flush_ns) {
      // A flush that does not wait for the writers: what they have written
      // so far into chunks still open is committed as scraped chunks.
      for (Source& s : sources_) s.producer->ScrapeWriters();
      last_flush = now;
    }
    DrainAll();
    if (streaming() && now - last_write >= write_ns) {
      StreamBuffers();
      last_write = now;
    }
    usleep(100 * 1000);
  }
}

Recording::Progress Recording::progress() const {
  Progress p;
  p.elapsed_s = static_cast<double>(ClockNs(CLOCK_BOOTTIME) - start_boottime_ns_) / 1e9;
  for (const Source& s : sources_) {
    if (s.ftrace != nullptr) p.events += s.ftrace->stats().events;
    if (s.bpf != nullptr) {
      p.events += s.bpf->events();
      for (const BpfDataSource::Loss& l : s.bpf->Losses()) p.events_lost += l.events;
    }
    if (s.ftrace != nullptr) p.events_lost += s.ftrace->stats().lost_events_stored;
  }
  absl::MutexLock lock(&mu_);
  for (const auto& b : buffers_) {
    const auto& st = b->stats();
    p.bytes_written += st.bytes_written;
    p.buffer_size += b->size();
    p.bytes_lost += st.bytes_overwritten;
  }
  return p;
}

absl::StatusOr<Recording::Summary> Recording::StopAndWrite() {
  for (Source& s : sources_) {
    if (s.ftrace != nullptr) s.ftrace->Stop();
    if (s.bpf != nullptr) s.bpf->Stop();
  }
  stop_.store(true);
  if (owner_.joinable()) owner_.join();
  DrainAll();
  const int64_t end_ns = ClockNs(CLOCK_BOOTTIME);
  // Losses before the buffers, taken before the sources go away.
  const Progress end = progress();
  Summary summary;
  summary.events_seen = end.events;
  summary.events_lost = end.events_lost;
  summary.bytes_overwritten = end.bytes_lost;
  trace::TraceStats staging;
  for (const Source& s : sources_) {
    const ProducerBuffer::Stats ps = s.producer->stats();
    summary.chunks_dropped += ps.pool_exhausted;
    auto* p = staging.add_ringside_producer_stats();
    p->set_data_source(s.name);
    p->set_chunks_committed(ps.chunks_committed);
    p->set_pool_exhausted(ps.pool_exhausted);
    p->set_stall_timeouts(ps.stall_timeouts);
    if (s.bpf != nullptr) {
      for (const BpfDataSource::Loss& l : s.bpf->Losses()) {
        auto* loss = staging.add_ringside_staging_loss();
        loss->set_data_source(s.name);
        loss->set_cpu(l.cpu);
        loss->set_kind(l.kind);
        loss->set_events_lost(l.events);
      }
    }
    if (s.ftrace != nullptr) {
      for (const auto& [cpu, n] : s.ftrace->overruns()) {
        auto* loss = staging.add_ringside_staging_loss();
        loss->set_data_source(s.name);
        loss->set_cpu(static_cast<uint32_t>(cpu));
        loss->set_kind("ftrace_overrun");
        loss->set_events_lost(n);
      }
    }
  }
  // The instances are gone: leave tracefs as we found it.
  for (Source& s : sources_) {
    s.ftrace.reset();
    s.bpf.reset();
  }
  if (tracefs_.has_value()) (void)tracefs_->Unmount();

  std::string out;
  if (!streaming()) AppendHeader(&out);
  // Buffer 0's read passes begin with the durable descriptors: all of them
  // into a file written at the end; when streaming, those that changed since
  // the last write.
  {
    absl::MutexLock lock(&mu_);
    AppendBufferPackets(&out);
  }
  auto emit = [&](TracePacket p) { AppendService(std::move(p), &out); };

  emit(ScanProcesses());
  emit(ClockSnapshot());
  TracePacket stats;
  stats.set_timestamp(static_cast<uint64_t>(end_ns));
  *stats.mutable_trace_stats() = staging;
  if (tracker_ != nullptr) {
    buffer::DurableStore::Stats d;
    {
      absl::MutexLock lock(&mu_);
      d = buffers_[0]->durable()->stats();
    }
    auto* ds = stats.mutable_trace_stats()->mutable_ringside_durable_buffer();
    ds->set_capacity(d.capacity);
    ds->set_bytes(d.bytes);
    ds->set_max_bytes(d.max_bytes);
    ds->set_entries(d.entries);
    ds->set_writes(d.writes);
    ds->set_replaced(d.replaced);
    ds->set_compacted(d.compacted);
    ds->set_evicted_ended(d.evicted_ended);
    ds->set_evicted_live(d.evicted_live);
    ds->set_rejected(d.rejected);
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) {
      const buffer::TraceBuffer::Stats& s = b->stats();
      summary.chunks_overwritten += s.chunks_overwritten;
      summary.chunks_discarded += s.chunks_discarded;
      auto* bs = stats.mutable_trace_stats()->add_buffer_stats();
      bs->set_buffer_size(s.buffer_size);
      bs->set_bytes_written(s.bytes_written);
      bs->set_bytes_overwritten(s.bytes_overwritten);
      bs->set_bytes_read(s.bytes_read);
      bs->set_padding_bytes_written(s.padding_bytes_written);
      bs->set_padding_bytes_cleared(s.padding_bytes_cleared);
      bs->set_chunks_written(s.chunks_written);
      bs->set_chunks_rewritten(s.chunks_rewritten);
      bs->set_chunks_relocated(s.chunks_relocated);
      bs->set_chunks_overwritten(s.chunks_overwritten);
      bs->set_chunks_discarded(s.chunks_discarded);
      bs->set_chunks_read(s.chunks_read);
      bs->set_chunks_committed_out_of_order(s.chunks_committed_out_of_order);
      bs->set_write_wrap_count(s.write_wrap_count);
      bs->set_patches_succeeded(s.patches_succeeded);
      bs->set_patches_failed(s.patches_failed);
      bs->set_readaheads_succeeded(s.readaheads_succeeded);
      bs->set_readaheads_failed(s.readaheads_failed);
      bs->set_abi_violations(s.abi_violations);
      bs->set_trace_writer_packet_loss(s.trace_writer_packet_loss);
      bs->set_data_loss_overwrite(s.data_loss_overwrite);
      bs->set_data_loss_read_gap(s.data_loss_read_gap);
    }
  }
  stats.mutable_trace_stats()->set_total_buffers(static_cast<uint32_t>(config_.buffers_size()));
  emit(stats);
  TracePacket disabled;
  disabled.set_timestamp(static_cast<uint64_t>(end_ns));
  disabled.mutable_service_event()->set_tracing_disabled(true);
  emit(disabled);

  if (streaming()) {
    absl::Status st = stream_pending_.empty() ? absl::OkStatus() : WriteToStream(stream_pending_);
    if (st.ok()) st = WriteToStream(out);
    if (st.ok()) st = output_->Commit();
    if (!st.ok()) {
      return absl::Status(
          st.code(), absl::StrCat(st.message(), "; it holds a valid trace of the first ",
                                  file_bytes_.load(), " bytes, without the end of the recording"));
    }
  } else {
    if (absl::Status s = output_->Commit(out); !s.ok()) return s;
  }
  summary.file_bytes = output_->bytes_written();
  summary.packets = packets_;
  summary.events_kept = events_kept_;
  return summary;
}

void Recording::AppendService(TracePacket p, std::string* out) {
  p.set_trusted_packet_sequence_id(kServiceSequenceId);
  AppendFramedPacket(p.SerializeAsString(), out);
  packets_++;
}

void Recording::AppendHeader(std::string* out) {
  TracePacket uuid;
  std::random_device rd;
  const uint64_t msb = uint64_t{rd()} << 32 | rd();
  const uint64_t lsb = uint64_t{rd()} << 32 | rd();
  uuid.mutable_trace_uuid()->set_msb(static_cast<int64_t>(msb));
  uuid.mutable_trace_uuid()->set_lsb(static_cast<int64_t>(lsb));
  AppendService(uuid, out);

  TracePacket info;
  utsname u;
  if (uname(&u) == 0) {
    auto* un = info.mutable_system_info()->mutable_utsname();
    un->set_sysname(u.sysname);
    un->set_version(u.version);
    un->set_release(u.release);
    un->set_machine(u.machine);
    info.mutable_system_info()->set_hostname(u.nodename);
  }
  info.mutable_system_info()->set_tracing_service_version(absl::StrCat("ringside ", kVersion));
  info.mutable_system_info()->set_page_size(static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  info.mutable_system_info()->set_num_cpus(static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_CONF)));
  time_t now = time(nullptr);
  tm local;
  localtime_r(&now, &local);
  info.mutable_system_info()->set_timezone_off_mins(static_cast<int32_t>(local.tm_gmtoff / 60));
  AppendService(info, out);
  AppendService(start_clocks_, out);
  TracePacket cfg;
  *cfg.mutable_trace_config() = config_;
  AppendService(cfg, out);
  // With the durable buffer, its descriptors (seeded from this scan) follow.
  if (tracker_ == nullptr) AppendService(start_processes_, out);
  TracePacket started;
  started.set_timestamp(static_cast<uint64_t>(start_boottime_ns_));
  started.mutable_service_event()->set_tracing_started(true);
  AppendService(started, out);
}

// The data: each packet gets its sequence id (and its loss flags) appended,
// as fields appended to a serialized message merge into it. Reading consumes
// what was read, so each call appends only what is new.
void Recording::AppendBufferPackets(std::string* out) {
  std::string bytes;
  for (auto& b : buffers_) {
    b->BeginRead();
    buffer::TracePacket packet;
    buffer::PacketSequenceProperties props;
    uint32_t loss = 0;
    while (b->ReadNextTracePacket(&packet, &props, &loss)) {
      const uint32_t key = uint32_t{props.producer_id_trusted} << 16 | props.writer_id;
      if (props.producer_id_trusted == buffer::TraceBuffer::kDurableProducerId) {
        sequence_ids_.try_emplace(key, kDescriptorSequenceId);
      }
      auto [it, inserted] =
          sequence_ids_.try_emplace(key, static_cast<uint32_t>(sequence_ids_.size()) + 3);
      bytes.clear();
      packet.AppendTo(&bytes);
      if (props.producer_id_trusted != buffer::TraceBuffer::kDurableProducerId) {
        AppendVarIntField(TracePacket::kTrustedUidFieldNumber,
                          static_cast<uint32_t>(props.client_identity_trusted.uid), &bytes);
      }
      AppendVarIntField(TracePacket::kTrustedPacketSequenceIdFieldNumber, it->second, &bytes);
      if (props.client_identity_trusted.pid > 0) {
        AppendVarIntField(TracePacket::kTrustedPidFieldNumber,
                          static_cast<uint32_t>(props.client_identity_trusted.pid), &bytes);
      }
      if (loss != 0)
        AppendVarIntField(TracePacket::kPreviousPacketDroppedFieldNumber, loss, &bytes);
      events_kept_ += CountEventsInPacket(bytes);
      AppendFramedPacket(bytes, out);
      packets_++;
    }
  }
}

}  // namespace ringside::agent
