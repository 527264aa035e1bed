#ifndef RINGSIDE_AGENT_SESSION_SESSION_SNAPSHOT_H_
#define RINGSIDE_AGENT_SESSION_SESSION_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/session/machine_identity.h"
#include "agent/sources/boot_recorder.h"
#include "agent/sources/previous_boot_reader.h"
#include "agent/tracefile/trace_sink.h"
#include "buffer/trace_buffer.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"
#include "ringside/trace/trace_stats.pb.h"

namespace ringside::agent {

// What made a snapshot be taken, written into its file as the
// clone_snapshot_trigger packet (Perfetto's Trigger).
struct SnapshotTrigger {
  SnapshotTrigger() = default;
  SnapshotTrigger(std::string name, std::string producer_name, int32_t uid, int64_t boottime_ns,
                  std::string detail = "")
      : name(std::move(name)),
        producer_name(std::move(producer_name)),
        uid(uid),
        boottime_ns(boottime_ns),
        detail(std::move(detail)) {}

  std::string name;           // The trigger's name ("manual", "oom_kill", a config's).
  std::string producer_name;  // Who fired it ("ringside snapshot", "bpf.incidents").
  int32_t uid = 0;            // The requester's uid, from trusted credentials.
  int64_t boottime_ns = 0;    // When it fired, on the trace's clock (BOOTTIME).
  // What fired it and the value it saw, when the kernel did ("memory some
  // >= 150 ms in 1000 ms of the machine: avg10 12.40%, ..."); else empty.
  std::string detail;
};

// The trigger of an earlier boot's snapshot (SessionSnapshot::
// OfPreviousBoot): its name in the file and in the agent's tally.
inline constexpr char kPreviousBootTrigger[] = "previous_boot";

// A session's buffers cloned at one moment (CLONE_SNAPSHOT): written to a
// file of its own, as a complete trace, while the session records on.
class SessionSnapshot {
 public:
  // Out of line: freeing the cloned buffers is the session's business, so
  // the snapshot's holders need not link buffer/ (check-links).
  ~SessionSnapshot();
  // Writes the clone as a whole trace into `sink` and finishes it: the
  // preamble (with the session's start clocks), the clone_snapshot_trigger
  // packet (once), the buffers' data, the clock snapshot and trace_stats of
  // the clone.
  absl::Status WriteTo(TraceSink* sink);
  // Joins `extra` (what only the snapshot's writer knows: the agent's
  // trigger tally, the triggers the file answers) to the trace_stats the
  // file ends with; one stats packet, as Perfetto's importer keeps one.
  // Before WriteTo().
  void MergeIntoStats(const trace::TraceStats& extra) {
    stats_.mutable_trace_stats()->MergeFrom(extra);
  }
  int64_t cloned_at_ns() const { return cloned_at_ns_; }
  const SnapshotTrigger& trigger() const { return trigger_; }
  // Running sources whose staging rings were not read within the limit
  // before the clone: their last events may be missing.
  int sources_not_flushed() const { return sources_not_flushed_; }
  // WriteTo() hands the sink this much at a time: a snapshot of a large
  // buffer is never a second copy of it in memory.
  static constexpr size_t kWriteBatchBytes = 1 << 20;

  // The events an earlier boot left in the kernel's persistent ftrace
  // instance, as a snapshot of that boot (previous_boot_snapshot.cc):
  // `reader`'s pages, read whole into a buffer of twice the instance's
  // size (`buffer_kb`; the newest kept if they need more), with the
  // previous boot's id and machine name (its `marker`; this machine's id)
  // and its clocks: the marker pairs the boot's BOOTTIME with REALTIME, so
  // the file's clock snapshots put its events on the wall-clock time they
  // happened. No /proc scan (this boot's processes are not that boot's).
  // The trigger is kPreviousBootTrigger at the last event. `*stats`: what the
  // pages held. kNotFound when they held no event.
  static absl::StatusOr<std::unique_ptr<SessionSnapshot>> OfPreviousBoot(
      PreviousBootReader* reader, const BootRecorder::Marker& marker, uint64_t buffer_kb,
      const MachineIdentity& machine, PreviousBootReader::Stats* stats);

 private:
  friend class TracingSession;  // Clones the buffers into a new one.
  SessionSnapshot() = default;
  config::TraceConfig config_;
  MachineIdentity machine_;
  std::vector<std::unique_ptr<buffer::TraceBuffer>> buffers_;
  bool durable_ = false;
  bool scan_processes_ = true;  // False for an earlier boot's.
  int64_t started_at_ns_ = 0;
  int64_t cloned_at_ns_ = 0;
  SnapshotTrigger trigger_;
  int sources_not_flushed_ = 0;
  trace::TracePacket start_clocks_;  // The session's, at its start.
  trace::TracePacket clocks_;        // At the clone.
  trace::TracePacket stats_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_SESSION_SNAPSHOT_H_
