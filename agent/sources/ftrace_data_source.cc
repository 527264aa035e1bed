#include "agent/sources/ftrace_data_source.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/sources/drain_wait.h"
#include "base/boottime.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

// Pages read from one CPU per drain before moving to the next CPU.
constexpr size_t kMaxPagesPerRead = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<FtraceDataSource>> FtraceDataSource::Create(
    const ftrace::Tracefs& tracefs, Config config, ProducerBuffer* producer) {
  std::unique_ptr<FtraceDataSource> ds(new FtraceDataSource(std::move(config), producer));
  absl::StatusOr<std::unique_ptr<ftrace::Instance>> instance =
      ftrace::Instance::Create(tracefs, ds->config_.instance_name);
  if (!instance.ok()) return instance.status();
  ds->instance_ = std::move(*instance);

  absl::StatusOr<uint32_t> kb = ds->instance_->SetBufferSizeKb(ds->config_.buffer_size_kb);
  if (!kb.ok()) return kb.status();
  ds->applied_buffer_size_kb_ = *kb;
  absl::StatusOr<std::string> clock = ds->instance_->SetTraceClock("boot");
  if (!clock.ok()) return clock.status();
  ds->applied_clock_ = *clock;
  // Best effort: older kernels lack buffer_percent; the drain period still works.
  (void)tracefs.Write(ds->instance_->relative_path() + "/buffer_percent",
                      absl::StrCat(ds->config_.buffer_percent));

  ds->enable_result_ = ds->instance_->EnableEvents(ds->config_.events);
  if (ds->enable_result_.enabled.empty()) {
    std::vector<std::string> reasons;
    for (const std::string& e : ds->enable_result_.unknown) reasons.push_back(e + ": unknown");
    for (const auto& [e, s] : ds->enable_result_.failed)
      reasons.push_back(std::string(s.message()));
    return absl::InvalidArgumentError(absl::StrCat("linux.ftrace: no event could be enabled (",
                                                   absl::StrJoin(reasons, "; "), ")"));
  }
  std::vector<std::string> formats = ds->enable_result_.enabled;
  formats.push_back("ftrace/print");  // trace_marker writes always arrive.
  absl::StatusOr<ftrace::EventTable> table = ftrace::EventTable::Load(tracefs, formats);
  if (!table.ok()) return table.status();
  ds->table_ = std::move(*table);

  absl::StatusOr<std::string> header_page = tracefs.Read("events/header_page");
  absl::StatusOr<std::string> header_event = tracefs.Read("events/header_event");
  if (!header_page.ok()) return header_page.status();
  if (!header_event.ok()) return header_event.status();
  absl::StatusOr<ftrace::PageHeaderFormat> page = ftrace::ParseHeaderPage(*header_page);
  absl::StatusOr<ftrace::EventHeaderFormat> event = ftrace::ParseHeaderEvent(*header_event);
  if (!page.ok()) return page.status();
  if (!event.ok()) return event.status();
  ds->parser_ = std::make_unique<ftrace::PageParser>(*page, *event);
  ds->num_cpus_ = static_cast<int>(sysconf(_SC_NPROCESSORS_CONF));
  ds->bundles_ = std::make_unique<FtraceBundleWriter>(
      &ds->table_, FtraceBundleWriter::Options{.compact_sched = ds->config_.compact_sched,
                                               .tracker = ds->config_.tracker,
                                               .num_cpus = static_cast<uint32_t>(ds->num_cpus_),
                                               .incidents = ds->config_.incidents != nullptr});

  ds->control_writer_ = producer->CreateTraceWriter(0);
  for (int cpu = 0; cpu < ds->num_cpus_; cpu++) {
    ds->cpu_writers_.push_back(producer->CreateTraceWriter(static_cast<buffer::WriterID>(1 + cpu)));
  }
  ds->readers_.resize(static_cast<size_t>(ds->num_cpus_));
  return ds;
}

FtraceDataSource::~FtraceDataSource() { Stop(); }

absl::Status FtraceDataSource::Start() {
  if (started_) return absl::FailedPreconditionError("linux.ftrace already started");
  OpenMissingReaders();
  WriteStats(trace::FtraceStats::START_OF_TRACE);
  if (absl::Status s = instance_->SetTracingOn(true); !s.ok()) return s;
  wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return absl::InternalError("eventfd failed");
  started_ = true;
  if (config_.reader_thread) {
    flush_.Open();
    thread_ = std::thread([this] { ReaderLoop(); });
  }
  return absl::OkStatus();
}

void FtraceDataSource::StopRecording() {
  if (started_ && instance_ != nullptr) (void)instance_->SetTracingOn(false);
}

void FtraceDataSource::Stop() {
  if (stopped_ || instance_ == nullptr) return;
  stopped_ = true;
  flush_.Close();
  (void)instance_->SetTracingOn(false);
  stop_.store(true);
  if (wake_fd_.valid()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  reader_state_.Claim();
  if (started_) {
    ReadKernelBuffers();
    WriteStats(trace::FtraceStats::END_OF_TRACE);
  }
  if (control_writer_ != nullptr) control_writer_->Flush();
  for (auto& w : cpu_writers_) w->Flush();
  readers_.clear();  // Close trace_pipe_raw before removing the instance.
  (void)instance_->Remove();
  wake_fd_.reset();
}

void FtraceDataSource::OpenMissingReaders() {
  reader_state_.Check();
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    if (readers_[cpu] != nullptr) continue;
    absl::StatusOr<std::unique_ptr<ftrace::CpuReader>> r =
        ftrace::CpuReader::Open(*instance_, cpu, parser_->page_format().page_size());
    if (r.ok()) readers_[cpu] = std::move(*r);  // Offline CPUs are retried later.
  }
}

void FtraceDataSource::ReadKernelBuffers() {
  reader_state_.Check();
  const size_t page_size = parser_->page_format().page_size();
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    ftrace::CpuReader* reader = readers_[cpu].get();
    if (reader == nullptr) continue;
    for (;;) {
      pages_.clear();
      absl::StatusOr<size_t> n = reader->ReadPages(kMaxPagesPerRead, &pages_);
      if (!n.ok() || *n == 0) break;
      pages_read_ += *n;
      // One bundle per run of pages without a loss in between.
      events_.clear();
      bool lost_at_start = false;
      for (size_t p = 0; p < *n; p++) {
        const size_t before = events_.size();
        ftrace::PageParser::PageResult r =
            parser_->Parse(pages_.data() + p * page_size, page_size, &events_);
        if (r.error != ftrace::PageParser::Error::kNone) pages_malformed_++;
        if (r.lost_events) {
          pages_with_lost_++;
          lost_stored_ += r.lost_count;
          if (before > 0) {
            // Close the bundle before the gap; the new one starts with it.
            std::vector<ftrace::RawEvent> tail(events_.begin() + static_cast<ptrdiff_t>(before),
                                               events_.end());
            events_.resize(before);
            bundles_->WriteBundle(cpu_writers_[cpu].get(), static_cast<uint32_t>(cpu), events_,
                                  lost_at_start);
            events_count_ += events_.size();
            events_ = std::move(tail);
          }
          lost_at_start = true;
        }
      }
      if (!events_.empty() || lost_at_start) {
        bundles_->WriteBundle(cpu_writers_[cpu].get(), static_cast<uint32_t>(cpu), events_,
                              lost_at_start);
        events_count_ += events_.size();
      }
      if (*n < kMaxPagesPerRead) break;
    }
    // Make what was read visible to the buffer's owner.
    cpu_writers_[cpu]->Flush();
    // Then the incidents: a snapshot they trigger holds their events.
    if (config_.incidents != nullptr) TellIncidents();
  }
}

void FtraceDataSource::TellIncidents() {
  for (Incident& incident : bundles_->TakeIncidents()) {
    // The task may have gone since: then its name stays as the event gave
    // it (a victim's, since 6.8), and the trigger's comms filter cannot
    // match it.
    const std::string proc = absl::StrCat("/proc/", incident.pid);
    if (incident.comm.empty()) {
      std::ifstream comm(proc + "/comm");
      std::getline(comm, incident.comm);
    }
    std::ifstream status(proc + "/status");
    for (std::string line; std::getline(status, line);) {
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, "Tgid:")) {
        (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &incident.tgid);
        break;
      }
    }
    config_.incidents->OnIncident(incident);
  }
}

bool FtraceDataSource::FlushStaging(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  const uint64_t n = flush_.Request([this] {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
  });
  if (n == 0) return false;  // Not started, stopping, or no reader thread.
  return flush_.Await(n, deadline);
}

void FtraceDataSource::ReaderLoop() {
  pthread_setname_np(pthread_self(), "rs-ftrace");
  reader_state_.Claim();
  int loops = 0;
  DrainWait wait(config_.drain_period_ms, base::BoottimeNs());
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{wake_fd_.get(), POLLIN, 0});  // Stop() wakes us at once.
    for (const auto& r : readers_) {
      if (r != nullptr) fds.push_back(pollfd{r->fd(), POLLIN, 0});
    }
    // Wakes when a CPU buffer passes buffer_percent, else after the wait:
    // drain_period_ms, longer while the buffers are quiet (DrainWait).
    poll(fds.data(), fds.size(), static_cast<int>(wait.next_ms()));
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_fd_.get(), &v, sizeof(v));  // Re-armed for the next wake.
    }
    // Taken before the read: a request made after it started waits for the
    // next round, which the wake makes immediate.
    const uint64_t flush = flush_.Pending();
    const uint64_t events_before = events_count_;
    ReadKernelBuffers();
    if (flush != 0) flush_.Served(flush);
    wait.AfterPass(events_count_ - events_before, base::BoottimeNs());
    // A snapshot's flush asked for during a pause wakes the poll above.
    pacer_.AfterPass(stop_, [this] { return flush_.UrgentPending(); });
    if (++loops % 50 == 0) OpenMissingReaders();  // CPUs that came online.
  }
}

void FtraceDataSource::WriteStats(int phase) {
  auto packet = control_writer_->NewTracePacket();
  ProtoMessage* stats = packet->BeginNested(trace::TracePacket::kFtraceStatsFieldNumber);
  using FS = trace::FtraceStats;
  using CS = trace::FtraceCpuStats;
  stats->AppendVarInt(FS::kPhaseFieldNumber, static_cast<uint64_t>(phase));
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    absl::StatusOr<ftrace::Instance::CpuStats> s = instance_->ReadCpuStats(cpu);
    if (!s.ok()) continue;
    if (s->lost() != 0) {
      absl::MutexLock lock(&losses_mu_);
      // The counters only grow: the last phase's values are the totals.
      overruns_[cpu] = s->lost();
    }
    ProtoMessage* c = stats->BeginNested(FS::kCpuStatsFieldNumber);
    c->AppendVarInt(CS::kCpuFieldNumber, static_cast<uint64_t>(cpu));
    c->AppendVarInt(CS::kEntriesFieldNumber, s->entries);
    c->AppendVarInt(CS::kOverrunFieldNumber, s->overrun);
    c->AppendVarInt(CS::kCommitOverrunFieldNumber, s->commit_overrun);
    c->AppendVarInt(CS::kBytesReadFieldNumber, s->bytes);
    uint64_t bits;
    std::memcpy(&bits, &s->oldest_event_ts, 8);
    c->AppendFixed64(CS::kOldestEventTsFieldNumber, bits);
    std::memcpy(&bits, &s->now_ts, 8);
    c->AppendFixed64(CS::kNowTsFieldNumber, bits);
    c->AppendVarInt(CS::kDroppedEventsFieldNumber, s->dropped_events);
    c->AppendVarInt(CS::kReadEventsFieldNumber, s->read_events);
    c->EndNested();
  }
  for (const std::string& e : enable_result_.unknown) {
    stats->AppendString(FS::kUnknownFtraceEventsFieldNumber, e);
  }
  for (const auto& [e, status] : enable_result_.failed) {
    stats->AppendString(FS::kFailedFtraceEventsFieldNumber,
                        absl::StrCat(e, ": ", status.message()));
  }
}

std::map<int, uint64_t> FtraceDataSource::overruns() const {
  absl::MutexLock lock(&losses_mu_);
  return overruns_;
}

std::vector<DataSource::Loss> FtraceDataSource::Losses() const {
  std::vector<Loss> out;
  for (const auto& [cpu, n] : overruns()) {
    if (n != 0) out.push_back(Loss{static_cast<uint32_t>(cpu), "ftrace_overrun", n});
  }
  return out;
}

std::vector<DataSource::EventTally> FtraceDataSource::EventTallies() const {
  return bundles_->EventTallies();
}

FtraceDataSource::Stats FtraceDataSource::stats() const {
  Stats s;
  s.pages_read = pages_read_.load();
  s.pages_malformed = pages_malformed_.load();
  s.events = events_count_.load();
  s.pages_with_lost_events = pages_with_lost_.load();
  s.lost_events_stored = lost_stored_.load();
  return s;
}

}  // namespace ringside::agent
