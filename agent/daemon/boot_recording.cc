#include "agent/daemon/boot_recording.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/output/boot_ring_state.h"
#include "agent/output/output_dir.h"
#include "agent/session/machine_identity.h"

namespace ringside::agent {
namespace {

using State = BootRecorder::Report::State;

std::string Utc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", t, absl::UTCTimeZone());
}

}  // namespace

std::unique_ptr<BootRecorder> StartBootRecording(const config::TraceConfig& config,
                                                 const MachineIdentity& machine, AgentLog& log,
                                                 BootRecorder::TakePreviousBoot take,
                                                 BootRecorder::Report* report) {
  std::unique_ptr<BootRecorder> recorder = BootRecorder::Start(
      {config.boot_instance(), machine.boot_id, machine.name, std::move(take)}, report);
  if (report->previous_boot_taken && !report->previous_boot_error.empty()) {
    log.Warning(absl::StrCat("the events of the previous boot (", report->previous_boot_id, ") in ",
                             report->instance, " are not kept: ", report->previous_boot_error));
  }
  switch (report->state) {
    case State::kOff:
      break;
    case State::kRecording:
      log.Notice(absl::StrCat("recording into ", report->instance, " (", report->buffer_kb,
                              " KiB, kept across a warm reboot",
                              report->resumed ? ", on top of this boot's earlier events" : "",
                              "): ", absl::StrJoin(report->events, " ")));
      break;
    case State::kUnavailable:
      log.Info(absl::StrCat("the events before a kernel panic are not kept: ", report->detail));
      break;
    case State::kPreviousBoot:
    case State::kOtherTool:
      log.Warning(absl::StrCat("not recording into ", report->instance, ": ", report->detail));
      break;
  }
  return recorder;
}

void FillBootInstanceStatus(const BootRecorder::Report& report, control::StatusReply* reply) {
  if (report.state == State::kOff) return;
  control::BootInstanceStatus* s = reply->mutable_boot_instance();
  s->set_instance(report.instance);
  s->set_state(BootRecorder::StateName(report.state));
  if (!report.detail.empty()) s->set_detail(report.detail);
  if (!report.previous_boot_id.empty()) s->set_previous_boot_id(report.previous_boot_id);
  for (const std::string& e : report.events) s->add_events(e);
  if (report.buffer_kb != 0) s->set_buffer_kb(report.buffer_kb);
  if (report.resumed) s->set_resumed(true);
}

std::string LostPreviousBoot(const std::optional<std::string>& recorded,
                             const BootRecorder::Report& report, const std::string& this_boot) {
  if (!recorded.has_value() || *recorded == this_boot || this_boot.empty()) return "";
  if (report.state != State::kRecording || report.resumed || report.previous_boot_taken) return "";
  return *recorded;
}

void BootRing::NoteRecordedBoot(const OutputDir& dir, const std::string& this_boot, AgentLog& log) {
  lost_boot_ = LostPreviousBoot(recorded_boot_, report_, this_boot);
  if (!lost_boot_.empty()) {
    log.Warning(absl::StrCat(
        "the events of the previous boot (", lost_boot_, ") in ", report_.instance,
        " are gone: the reboot was cold (power cycle, firmware reset) or the kernel reserved "
        "other memory for the instance (KASLR can place the kernel over the old reservation: "
        "docs/flight-recorder.md)"));
  }
  if (absl::Status st = WriteRecordedBoot(dir, this_boot); !st.ok()) {
    log.Warning(absl::StrCat("cannot note the boot the ring records: ", st.message()));
  }
}

void BootRing::Start(const config::TraceConfig& config, AgentLog& log) {
  const MachineIdentity machine =
      ReadMachineIdentity(config.has_machine_name() ? config.machine_name() : "");
  // Where the boot the ring recorded is noted; none when the directory
  // cannot be opened (the agent's start says why).
  std::unique_ptr<OutputDir> dir;
  if (!config.boot_instance().empty()) {
    if (absl::StatusOr<std::unique_ptr<OutputDir>> opened =
            OutputDir::Open(config.output_dir(), std::nullopt);
        opened.ok()) {
      dir = *std::move(opened);
      recorded_boot_ = ReadRecordedBoot(*dir);
    }
  }
  recorder_ = StartBootRecording(
      config, machine, log,
      [&](PreviousBootReader* reader, const BootRecorder::Marker& marker, uint64_t buffer_kb) {
        return TakePreviousBoot(reader, marker, buffer_kb, machine);
      },
      &report_);
  if (report_.state == State::kRecording && dir != nullptr) {
    NoteRecordedBoot(*dir, machine.boot_id, log);
  }
  absl::MutexLock lock(&mu_);
  if (report_.previous_boot_taken && !previous_status_.has_value()) {
    // Cleared unread (another kernel's): status says why there is no file.
    previous_status_.emplace().set_error(report_.previous_boot_error);
  }
  if (previous_ != nullptr && previous_status_.has_value()) {
    log.Notice(absl::StrCat("read the events of the previous boot (", report_.previous_boot_id,
                            ") from ", report_.instance, ": ", previous_status_->events(),
                            " events from ",
                            Utc(absl::FromUnixNanos(previous_status_->first_realtime_ns())), " to ",
                            Utc(absl::FromUnixNanos(previous_status_->last_realtime_ns())),
                            previous_status_->pages_malformed() > 0
                                ? absl::StrCat("; ", previous_status_->pages_malformed(),
                                               " malformed pages skipped, the first ",
                                               previous_status_->first_malformed())
                                : ""));
  }
}

absl::Status BootRing::TakePreviousBoot(PreviousBootReader* reader,
                                        const BootRecorder::Marker& marker, uint64_t buffer_kb,
                                        const MachineIdentity& machine) {
  PreviousBootReader::Stats stats;
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> snap =
      SessionSnapshot::OfPreviousBoot(reader, marker, buffer_kb, machine, &stats);
  const int64_t to_realtime = marker.realtime_ns - marker.boottime_ns;
  control::PreviousBootSnapshot status;
  status.set_events(stats.events);
  status.set_pages(stats.pages);
  if (stats.events > 0) {
    status.set_first_realtime_ns(static_cast<int64_t>(stats.first_ns()) + to_realtime);
    status.set_last_realtime_ns(static_cast<int64_t>(stats.last_ns()) + to_realtime);
  }
  status.set_pages_malformed(stats.pages_malformed);
  if (!stats.first_malformed.empty()) status.set_first_malformed(stats.first_malformed);
  status.set_pages_after_gap(stats.pages_with_lost);
  status.set_unknown_events(stats.unknown_events);
  if (!snap.ok()) status.set_error(std::string(snap.status().message()));
  absl::MutexLock lock(&mu_);
  previous_status_ = std::move(status);
  if (!snap.ok()) return snap.status();
  previous_ = std::move(*snap);
  previous_when_ = absl::FromUnixNanos(previous_status_->last_realtime_ns());
  return absl::OkStatus();
}

void BootRing::QueueSnapshot(SnapshotWriter* writer, AgentLog& log) {
  if (previous_ == nullptr) return;
  // Held across Put(): the writer may finish the file (Written) before
  // Put() returns, and must find its path. The writer calls Written
  // holding none of its own locks.
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> path =
      writer->Put("previous-boot", std::move(previous_), previous_when_);
  if (!path.ok()) {
    previous_status_->set_error(std::string(path.status().message()));
    log.Warning(absl::StrCat("the previous boot's events were read but cannot be written: ",
                             path.status().message()));
    return;
  }
  previous_path_ = *path;
  log.Notice(absl::StrCat("writing the previous boot's events into ", *path));
}

void BootRing::Written(const SnapshotWriter::Result& result) {
  absl::MutexLock lock(&mu_);
  if (previous_path_.empty() || result.taken_path != previous_path_) return;
  if (result.status.ok()) {
    previous_status_->set_path(result.path);
  } else {
    previous_status_->set_error(std::string(result.status.message()));
  }
}

void BootRing::FillStatus(control::StatusReply* reply) const {
  FillBootInstanceStatus(report_, reply);
  if (!lost_boot_.empty()) reply->mutable_boot_instance()->set_previous_boot_lost(lost_boot_);
  absl::MutexLock lock(&mu_);
  if (previous_status_.has_value() && reply->has_boot_instance()) {
    *reply->mutable_boot_instance()->mutable_previous_boot_snapshot() = *previous_status_;
  }
}

absl::Time BootRing::Tick() {
  if (recorder_ == nullptr) return absl::InfiniteFuture();
  const absl::Time now = absl::Now();
  if (now < next_mark_) return next_mark_;
  (void)recorder_->Mark();
  next_mark_ = now + absl::Seconds(1);
  return next_mark_;
}

}  // namespace ringside::agent
