#ifndef RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
#define RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_

#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "agent/lifecycle/agent_log.h"
#include "agent/sources/boot_recorder.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's recording into the kernel's persistent ftrace instance
// (config boot_instance; BootRecorder): started beside the config's sources,
// with this boot's id and the machine's name in its marker. What it found is
// logged once (a notice when recording, a warning when the instance is
// there but left alone, an info line when there is none) and kept for
// `status`. Null unless recording.
std::unique_ptr<BootRecorder> StartBootRecording(const config::TraceConfig& config, AgentLog& log,
                                                 BootRecorder::Report* report);

// `report` as `status` shows it; nothing when boot_instance is "".
void FillBootInstanceStatus(const BootRecorder::Report& report, control::StatusReply* reply);

// The agent's boot ring: StartBootRecording's recorder and report, and its
// marker written again every second (Tick, from the agent's loop, which
// wakes at least that often), so that the ring holds a recent one whatever
// it overwrote.
class BootRing {
 public:
  void Start(const config::TraceConfig& config, AgentLog& log) {
    recorder_ = StartBootRecording(config, log, &report_);
  }
  void Tick();
  void FillStatus(control::StatusReply* reply) const { FillBootInstanceStatus(report_, reply); }

 private:
  std::unique_ptr<BootRecorder> recorder_;
  BootRecorder::Report report_;
  absl::Time next_mark_ = absl::InfinitePast();
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
