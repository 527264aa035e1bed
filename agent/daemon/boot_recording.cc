#include "agent/daemon/boot_recording.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/session/machine_identity.h"

namespace ringside::agent {

using State = BootRecorder::Report::State;

std::unique_ptr<BootRecorder> StartBootRecording(const config::TraceConfig& config, AgentLog& log,
                                                 BootRecorder::Report* report) {
  const MachineIdentity machine =
      ReadMachineIdentity(config.has_machine_name() ? config.machine_name() : "");
  std::unique_ptr<BootRecorder> recorder =
      BootRecorder::Start({config.boot_instance(), machine.boot_id, machine.name}, report);
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

void BootRing::Tick() {
  const absl::Time now = absl::Now();
  if (recorder_ == nullptr || now < next_mark_) return;
  (void)recorder_->Mark();
  next_mark_ = now + absl::Seconds(1);
}

}  // namespace ringside::agent
