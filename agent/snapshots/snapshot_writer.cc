#include "agent/snapshots/snapshot_writer.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/output/compressing_sink.h"
#include "agent/output/file_retention.h"
#include "agent/output/output_file.h"
#include "agent/output/rotating_trace_file.h"
#include "agent/output/trace_sidecar.h"
#include "agent/session/service_packets.h"
#include "agent/snapshots/snapshot_retention.h"

namespace ringside::agent {
namespace {

// How many finished snapshots Wait() can still find.
constexpr size_t kRememberedResults = 16;
constexpr size_t kMaxReasonInName = 48;

}  // namespace

std::string SnapshotFileName(absl::string_view hostname, absl::Time when,
                             absl::string_view reason) {
  std::string safe;
  for (char c : reason.substr(0, kMaxReasonInName)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    safe.push_back(ok ? c : '_');
  }
  // Never a hidden file, never a name that is only dots, and never one only
  // of digits: that is a streaming file's sequence number.
  if (safe.empty() || safe[0] == '.' ||
      std::all_of(safe.begin(), safe.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    safe = absl::StrCat("r", safe);
  }
  return absl::StrCat(AgentFileStem(hostname, when), "-", safe, ".pftrace");
}

bool SnapshotWriter::Result::Held::Holds(const TraceSummary::Window& window) const {
  return TraceSummary::SpanHolds(from_ns, until_ns, window);
}

SnapshotWriter::SnapshotWriter(TracingSession* session, std::string output_dir,
                               std::function<void(const Result&)> on_done, TriggerTally* tally)
    : session_(session),
      on_done_(std::move(on_done)),
      tally_(tally),
      reserve_bytes_(TracingSession::MaxTraceBytes(session->config())),
      host_(FileHost::Local(session->config().machine_name())),
      output_dir_(std::move(output_dir)) {
  thread_ = std::thread([this] { Loop(); });
}

SnapshotWriter::~SnapshotWriter() { Finish(); }

void SnapshotWriter::set_retention(uint32_t max_files, uint64_t max_bytes) {
  absl::MutexLock lock(&mu_);
  max_files_ = max_files;
  max_bytes_ = max_bytes;
}

void SnapshotWriter::set_output_group(std::optional<gid_t> group) {
  absl::MutexLock lock(&mu_);
  group_ = group;
}

void SnapshotWriter::set_compression(PacketCompression compression) {
  absl::MutexLock lock(&mu_);
  compression_ = compression;
  stats_.codec = compression.codec;
}

void SnapshotWriter::set_output_dir(std::string dir) {
  absl::MutexLock lock(&mu_);
  output_dir_ = std::move(dir);
}

SnapshotWriter::Stats SnapshotWriter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status SnapshotWriter::ChooseFileLocked(absl::string_view reason, absl::Time when,
                                              Pending* pending) {
  absl::StatusOr<std::unique_ptr<OutputDir>> dir = OutputDir::Open(output_dir_, group_);
  if (!dir.ok()) return dir.status();
  pending->dir = std::move(*dir);
  const std::string name = SnapshotFileName(host_.name(), when, reason);
  const std::string stem = name.substr(0, name.size() - std::string(".pftrace").size());
  // Two snapshots in one second for one reason: -2, -3, ...
  for (int n = 1; n < 1000; n++) {
    pending->name = absl::StrCat(n == 1 ? stem : absl::StrCat(stem, "-", n), ".pftrace");
    pending->path = pending->dir->Join(pending->name);
    struct stat st;
    bool taken =
        fstatat(pending->dir->fd(), pending->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ||
        pending->path == writing_;
    for (const Pending& p : queue_) taken |= p.path == pending->path;
    if (!taken) return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("output_dir ", output_dir_, " has 999 snapshots named ", stem));
}

absl::StatusOr<std::string> SnapshotWriter::Take(absl::string_view reason) {
  return Take(reason, SnapshotTrigger{std::string(reason), "ringside agent",
                                      static_cast<int32_t>(geteuid()), BoottimeNowNs()});
}

void SnapshotWriter::ListTriggers(const SnapshotTrigger& trigger,
                                  const std::vector<SnapshotTrigger>& joined,
                                  const std::optional<TraceSummary::Window>& window,
                                  Pending* pending) {
  if (window.has_value() && pending->windows.size() < kMaxTriggersListedPerSnapshot) {
    pending->windows.push_back(*window);
  }
  if (pending->triggers.size() < kMaxTriggersListedPerSnapshot) {
    pending->triggers.push_back(trigger);
  }
  for (const SnapshotTrigger& t : joined) {
    if (pending->triggers.size() >= kMaxTriggersListedPerSnapshot) break;
    pending->triggers.push_back(t);
  }
}

absl::StatusOr<std::string> SnapshotWriter::Take(absl::string_view reason,
                                                 const SnapshotTrigger& trigger,
                                                 const std::vector<SnapshotTrigger>& joined,
                                                 std::optional<TraceSummary::Window> window,
                                                 absl::string_view tally_as) {
  if (tally_as.empty()) tally_as = trigger.name;
  absl::MutexLock lock(&mu_);
  // Another thread's clone in progress (the control thread and the main
  // thread both take snapshots) is waited for and joined like a queued
  // one: never two clones at once on top of one being written.
  mu_.Await(absl::Condition(
      +[](bool* cloning) { return !*cloning; }, &cloning_));
  if (finishing_) return absl::FailedPreconditionError("the agent is stopping");
  // A clone still waiting for the writer, taken at or after the trigger,
  // holds what the trigger is about: join it.
  if (!queue_.empty() && queue_.back().joinable &&
      queue_.back().snapshot->cloned_at_ns() >= trigger.boottime_ns) {
    stats_.joined++;
    if (tally_ != nullptr) tally_->Count(tally_as, TriggerTally::Outcome::kJoined);
    ListTriggers(trigger, joined, window, &queue_.back());
    return queue_.back().path;
  }
  // One is waiting, taken before this trigger (an OOM kill while an
  // earlier snapshot waits behind a slow write): a fresh clone replaces its
  // data under its name, so that file holds this trigger's events. The old
  // clone goes first, so that the memory holds at most the clone being
  // written and this one (the writer does not take the waiting file
  // while cloning_).
  std::unique_ptr<SessionSnapshot> stale;
  if (!queue_.empty() && queue_.back().joinable) stale = std::move(queue_.back().snapshot);
  cloning_ = true;
  mu_.Unlock();
  if (stale != nullptr) {
    stale.reset();
    malloc_trim(0);
    clones_held_.fetch_sub(1);
  }
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap = session_->CloneSnapshot(trigger);
  if (snap.ok()) CountClone();
  mu_.Lock();
  cloning_ = false;
  if (!queue_.empty() && queue_.back().joinable) {
    Pending& waiting = queue_.back();
    stats_.joined++;
    if (tally_ != nullptr) tally_->Count(tally_as, TriggerTally::Outcome::kJoined);
    ListTriggers(trigger, joined, window, &waiting);
    if (snap.ok()) {
      waiting.snapshot = std::move(*snap);
    } else {
      waiting.clone_error = snap.status();
    }
    if (!snap.ok()) return snap.status();
    return waiting.path;
  }
  if (!snap.ok()) return snap.status();
  if (finishing_) return absl::FailedPreconditionError("the agent is stopping");
  return QueueLocked(reason, absl::Now(), std::move(*snap), trigger, joined, window, tally_as,
                     /*joinable=*/true);
}

absl::StatusOr<std::string> SnapshotWriter::QueueLocked(
    absl::string_view reason, absl::Time when, std::unique_ptr<SessionSnapshot> snapshot,
    const SnapshotTrigger& trigger, const std::vector<SnapshotTrigger>& joined,
    const std::optional<TraceSummary::Window>& window, absl::string_view tally_as, bool joinable) {
  Pending pending;
  if (absl::Status st = ChooseFileLocked(reason, when, &pending); !st.ok()) return st;
  // A name can come back after a failed write left no file: Wait() on it
  // must see this snapshot's outcome, not that one's.
  std::erase_if(done_, [&](const Result& r) { return r.taken_path == pending.path; });
  if (tally_ != nullptr) tally_->Count(tally_as, TriggerTally::Outcome::kFired);
  pending.reason = trigger.name;  // The reason as given; `reason` may carry a prefix.
  pending.snapshot = std::move(snapshot);
  pending.joinable = joinable;
  ListTriggers(trigger, joined, window, &pending);
  queue_.push_back(std::move(pending));
  return queue_.back().path;
}

absl::StatusOr<std::string> SnapshotWriter::Put(absl::string_view reason,
                                                std::unique_ptr<SessionSnapshot> snapshot,
                                                absl::Time when) {
  absl::MutexLock lock(&mu_);
  if (finishing_) return absl::FailedPreconditionError("the agent is stopping");
  const SnapshotTrigger trigger = snapshot->trigger();
  absl::StatusOr<std::string> path = QueueLocked(reason, when, std::move(snapshot), trigger, {},
                                                 std::nullopt, trigger.name, /*joinable=*/false);
  if (path.ok()) CountClone();  // Held in memory until written, as a clone is.
  return path;
}

absl::StatusOr<std::string> SnapshotWriter::Wait(const std::string& path, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const Result* found = nullptr;
  auto done = [&] {
    for (const Result& r : done_) {
      if (r.taken_path == path) found = &r;
    }
    return found != nullptr;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the snapshot ", path, " was not written within ",
                     absl::FormatDuration(timeout), "; it may still be"));
  }
  if (!found->status.ok()) return found->status;
  return found->path;
}

std::optional<SnapshotWriter::Result> SnapshotWriter::Outcome(const std::string& path) const {
  absl::MutexLock lock(&mu_);
  for (auto r = done_.rbegin(); r != done_.rend(); ++r) {
    if (r->taken_path == path) return *r;
  }
  return std::nullopt;
}

void SnapshotWriter::CountClone() {
  const int held = clones_held_.fetch_add(1) + 1;
  int peak = peak_clones_held_.load();
  while (held > peak && !peak_clones_held_.compare_exchange_weak(peak, held)) {
  }
}

void SnapshotWriter::Finish() {
  {
    absl::MutexLock lock(&mu_);
    finishing_ = true;
    // A Take() cloning now drops its clone once done: wait for that, so
    // that nothing uses the session after Finish() returns.
    mu_.Await(absl::Condition(
        +[](bool* cloning) { return !*cloning; }, &cloning_));
  }
  if (thread_.joinable()) thread_.join();
}

trace::TraceStats SnapshotWriter::ExtraStats(const Pending& pending) const {
  trace::TraceStats stats;
  for (const TraceSummary::Window& w : pending.windows) {
    trace::TraceStats::SnapshotWindow* out = stats.add_ringside_snapshot_windows();
    out->set_first_ns(w.first_ns);
    out->set_last_ns(w.last_ns);
  }
  if (tally_ != nullptr) {
    for (const TriggerTally::Counts& c : tally_->counts()) {
      trace::TraceStats::TriggerCount* out = stats.add_ringside_triggers();
      out->set_name(c.name);
      out->set_fired(c.fired);
      out->set_joined(c.joined);
      out->set_suppressed(c.suppressed);
    }
  }
  for (const SnapshotTrigger& t : pending.triggers) {
    trace::TraceStats::SnapshotTrigger* out = stats.add_ringside_snapshot_triggers();
    out->set_trigger_name(t.name);
    out->set_producer_name(t.producer_name);
    out->set_trusted_producer_uid(t.uid);
    out->set_timestamp(static_cast<uint64_t>(t.boottime_ns));
    if (!t.detail.empty()) out->set_detail(t.detail);
  }
  return stats;
}

void SnapshotWriter::FinishOldSnapshots(bool stream_files) {
  absl::MutexLock lock(&mu_);
  old_snapshots_to_finish_ = true;
  old_stream_files_to_finish_ = stream_files;
}

void SnapshotWriter::WriteMissingSidecars(const std::string& dir, std::optional<gid_t> group,
                                          bool stream_files) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return;  // Made with the first snapshot.
  absl::StatusOr<std::unique_ptr<OutputDir>> opened = OutputDir::Open(dir, group);
  if (!opened.ok()) return;  // The next Take() says why.
  const auto ours = [this, stream_files](absl::string_view name) {
    return IsSnapshotFileName(name, host_) || (stream_files && IsStreamFileName(name, host_));
  };
  for (const std::string& name : TracesWithoutSidecar(**opened, ours)) {
    const absl::Status st = WriteSidecar(**opened, name, group).status();
    if (st.ok() || absl::IsNotFound(st)) continue;
    absl::MutexLock lock(&mu_);
    stats_.sidecars_failed++;
    stats_.last_sidecar_error = std::string(st.message());
  }
}

void SnapshotWriter::Loop() {
  pthread_setname_np(pthread_self(), "rs-snapshot");
  for (;;) {
    Pending next;
    std::optional<gid_t> group;
    PacketCompression compression;
    if (!NextToWrite(&next, &group, &compression)) return;
    Result result{absl::OkStatus(), next.path,        next.reason,
                  next.path,        absl::OkStatus(), std::nullopt};
    CompressedBytes compressed;
    if (next.snapshot == nullptr) {
      // Its clone was dropped for a fresher one, which failed.
      result.status = next.clone_error;
    } else {
      WriteFile(&next, group, compression, &result, &compressed);
    }
    PruneResult pruned;
    if (result.status.ok()) pruned = FinishFile(*next.dir, group, &result);
    Record(result, compressed, pruned);
    if (on_done_) on_done_(result);
  }
}

bool SnapshotWriter::NextToWrite(Pending* next, std::optional<gid_t>* group,
                                 PacketCompression* compression) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.Await(absl::Condition(
        +[](SnapshotWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          // Not while a Take() clones: it may be replacing the waiting
          // file's clone.
          return (!w->queue_.empty() && !w->cloning_) || (w->finishing_ && !w->cloning_) ||
                 w->old_snapshots_to_finish_;
        },
        this));
    if (old_snapshots_to_finish_) {
      old_snapshots_to_finish_ = false;
      const std::string dir = output_dir_;
      const std::optional<gid_t> old_group = group_;
      const bool stream_files = old_stream_files_to_finish_;
      mu_.Unlock();
      WriteMissingSidecars(dir, old_group, stream_files);
      mu_.Lock();
      continue;
    }
    if (queue_.empty()) return false;  // Finishing, and nothing left.
    *next = std::move(queue_.front());
    queue_.pop_front();
    writing_ = next->path;
    *group = group_;
    *compression = compression_;
    return true;
  }
}

void SnapshotWriter::WriteFile(Pending* next, std::optional<gid_t> group,
                               const PacketCompression& compression, Result* result,
                               CompressedBytes* compressed) {
  absl::StatusOr<std::unique_ptr<OutputFile>> file =
      OutputFile::CreateWholeIn(next->dir->fd(), next->name, next->path, reserve_bytes_);
  if (file.ok() && group.has_value()) {
    if (absl::Status st = (*file)->ShareWithGroup(*group); !st.ok()) file = st;
  }
  if (!file.ok()) {
    result->status = file.status();
  } else {
    next->snapshot->MergeIntoStats(ExtraStats(*next));
    if (compression.codec == PacketCodec::kNone) {
      result->status = next->snapshot->WriteTo(file->get());
    } else if (absl::StatusOr<std::unique_ptr<PacketCompressor>> c =
                   PacketCompressor::Create(compression);
               !c.ok()) {
      result->status = c.status();
    } else {
      // Compressed here, on this writer's thread: the writers' pause
      // for the clone is over by now.
      CompressingSink sink(file->get(), std::move(*c));
      result->status = next->snapshot->WriteTo(&sink);
      if (result->status.ok()) {
        compressed->in_bytes = sink.bytes_in();
        compressed->out_bytes = sink.bytes_out();
        compressed->cpu_ns = sink.cpu_ns();
      }
    }
    result->path = (*file)->display_name();
  }
  // Its memory goes before the next clone comes, back to the system
  // (the pieces below the mmap threshold too).
  next->snapshot.reset();
  malloc_trim(0);
  clones_held_.fetch_sub(1);
}

PruneResult SnapshotWriter::FinishFile(const OutputDir& dir, std::optional<gid_t> group,
                                       Result* result) {
  const std::string name = result->path.substr(result->path.find_last_of('/') + 1);
  absl::StatusOr<TraceSummary> summary = WriteSidecar(dir, name, group);
  result->sidecar = summary.status();
  if (summary.ok()) {
    result->held = Result::Held{summary->HeldFrom(), summary->last_timestamp_ns,
                                summary->realtime_offset_last_ns};
  }
  uint32_t max_files;
  uint64_t max_bytes;
  {
    absl::MutexLock lock(&mu_);
    max_files = max_files_;
    max_bytes = max_bytes_;
  }
  return PruneSnapshots(dir, host_, max_files, max_bytes, name);
}

void SnapshotWriter::Record(const Result& result, const CompressedBytes& compressed,
                            const PruneResult& pruned) {
  absl::MutexLock lock(&mu_);
  stats_.compressed_in_bytes += compressed.in_bytes;
  stats_.compressed_out_bytes += compressed.out_bytes;
  stats_.compression_cpu_ns += compressed.cpu_ns;
  stats_.deleted_files += pruned.files_deleted;
  stats_.deleted_bytes += pruned.bytes_deleted;
  writing_.clear();
  if (result.status.ok()) {
    stats_.written++;
    stats_.last_path = result.path;
    stats_.last_reason = result.reason;
    if (!result.sidecar.ok()) {
      stats_.sidecars_failed++;
      stats_.last_sidecar_error = std::string(result.sidecar.message());
    }
  } else {
    stats_.failed++;
    stats_.last_error = std::string(result.status.message());
  }
  done_.push_back(result);
  if (done_.size() > kRememberedResults) done_.pop_front();
}

}  // namespace ringside::agent
