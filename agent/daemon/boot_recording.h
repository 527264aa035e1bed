#ifndef RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
#define RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/output/output_dir.h"
#include "agent/session/session_snapshot.h"
#include "agent/snapshots/snapshot_writer.h"
#include "agent/sources/boot_recorder.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's recording into the kernel's persistent ftrace instance
// (config boot_instance; BootRecorder): started beside the config's sources,
// with this boot's id and the machine's name in its marker; an earlier
// boot's events found there go to `take` first. What it found is logged
// once (a notice when recording, a warning when the instance is there but
// left alone, an info line when there is none) and kept for `status`. Null
// unless recording.
std::unique_ptr<BootRecorder> StartBootRecording(const config::TraceConfig& config,
                                                 const MachineIdentity& machine, AgentLog& log,
                                                 BootRecorder::TakePreviousBoot take,
                                                 BootRecorder::Report* report);

// The earlier boot whose ring is gone: the boot the output directory says
// was recorded last (`recorded`, .ringside-boot-ring), when it is not this
// one, and the agent now records into an instance that held none of its
// events (a cold reboot, or the kernel reserved other memory: KASLR).
// Empty otherwise.
std::string LostPreviousBoot(const std::optional<std::string>& recorded,
                             const BootRecorder::Report& report, const std::string& this_boot);

// `report` as `status` shows it; nothing when boot_instance is "".
void FillBootInstanceStatus(const BootRecorder::Report& report, control::StatusReply* reply);

// The agent's boot ring: StartBootRecording's recorder and report, the
// snapshot of the earlier boot's events it found (SessionSnapshot::
// OfPreviousBoot, "<host>-<time of its last event>-previous-boot.pftrace",
// handed to the snapshot writer once there is one), and its marker written
// again every second (Tick, from the agent's loop, which wakes when Tick
// says), so that the ring holds a recent one whatever it overwrote.
//
// Start, QueueSnapshot and Tick on the agent's main thread; Written on the
// snapshot writer's; FillStatus on any.
class BootRing {
 public:
  void Start(const config::TraceConfig& config, AgentLog& log);
  // Queues the earlier boot's snapshot Start made, if any, into `writer`.
  void QueueSnapshot(SnapshotWriter* writer, AgentLog& log);
  // A snapshot was written or failed: the earlier boot's outcome, if it
  // is that one's.
  void Written(const SnapshotWriter::Result& result);
  // Writes the marker when it is due; returns when it is due next
  // (absl::InfiniteFuture() without a boot ring).
  absl::Time Tick();
  void FillStatus(control::StatusReply* reply) const;

 private:
  // `take` of StartBootRecording: reads the earlier boot's events into
  // previous_.
  absl::Status TakePreviousBoot(PreviousBootReader* reader, const BootRecorder::Marker& marker,
                                uint64_t buffer_kb, const MachineIdentity& machine);

  // Notes the boot recorded in the output directory, and says when the
  // previous one's ring was lost (LostPreviousBoot).
  void NoteRecordedBoot(const OutputDir& dir, const std::string& this_boot, AgentLog& log);

  std::unique_ptr<BootRecorder> recorder_;
  BootRecorder::Report report_;
  std::optional<std::string> recorded_boot_;  // As the output directory said at the start.
  std::string lost_boot_;                     // LostPreviousBoot's.
  absl::Time next_mark_ = absl::InfinitePast();
  std::unique_ptr<SessionSnapshot> previous_;
  absl::Time previous_when_;  // The wall-clock time of its last event.
  mutable absl::Mutex mu_;
  std::optional<control::PreviousBootSnapshot> previous_status_ ABSL_GUARDED_BY(mu_);
  std::string previous_path_ ABSL_GUARDED_BY(mu_);  // As Put() named it.
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_BOOT_RECORDING_H_
