#include "agent/session/session_snapshot.h"

#include <string>
#include <utility>
#include <vector>

#include "agent/descriptors/process_scan.h"
#include "agent/session/buffer_reader.h"
#include "agent/session/service_packets.h"

namespace ringside::agent {

using trace::TracePacket;

SessionSnapshot::~SessionSnapshot() = default;

absl::Status SessionSnapshot::WriteTo(TraceSink* sink) {
  std::string out;
  auto emit = [&](TracePacket p) { AppendServicePacket(std::move(p), machine_.id, &out); };
  emit(TraceUuidPacket());
  emit(SystemInfoPacket(machine_));
  // The session's start clocks: the importer takes clock snapshots in file
  // order and refuses one older than the last (invalid_clock_snapshots),
  // and the ring's own (every snapshot_interval_ms) come next. The clone's
  // goes last, with the stats.
  emit(start_clocks_);
  emit(TraceConfigPacket(config_));
  if (!durable_ && scan_processes_) {
    TracePacket scan = ScanProcesses();
    std::vector<TracePacket> labels = PodLabelsPackets(scan);
    emit(std::move(scan));
    for (TracePacket& packet : labels) emit(std::move(packet));
  }
  emit(TracingStartedPacket(started_at_ns_));
  // Where Perfetto's service puts it: with the session's own packets, before
  // the data; the importer reads its timestamp as the trigger's time.
  emit(CloneSnapshotTriggerPacket(trigger_.name, trigger_.producer_name, trigger_.uid,
                                  trigger_.boottime_ns));
  BufferPacketReader reader;
  reader.set_machine_id(machine_.id);
  std::vector<buffer::TraceBuffer*> buffers;
  for (auto& b : buffers_) buffers.push_back(b.get());
  if (absl::Status st = reader.WriteInto(buffers, &out, sink, kWriteBatchBytes); !st.ok()) {
    return st;
  }
  emit(clocks_);
  emit(stats_);
  if (absl::Status st = sink->Write(out); !st.ok()) return st;
  return sink->Finish();
}

}  // namespace ringside::agent
