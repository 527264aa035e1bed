#ifndef RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
#define RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_

#include <memory>

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

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
