// SessionSnapshot::OfPreviousBoot: the events an earlier boot left in the
// kernel's persistent ftrace instance, as a snapshot file of that boot.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/session/service_packets.h"
#include "agent/session/session_snapshot.h"
#include "agent/writer/producer_buffer.h"

namespace ringside::agent {

absl::StatusOr<std::unique_ptr<SessionSnapshot>> SessionSnapshot::OfPreviousBoot(
    PreviousBootReader* reader, const BootRecorder::Marker& marker, uint64_t buffer_kb,
    const MachineIdentity& machine, PreviousBootReader::Stats* stats) {
  // The pages encode to about their own size (compact_sched is smaller,
  // generic events larger): twice the instance holds them, and the newest
  // are kept should it not.
  constexpr uint64_t kMinBytes = 1 << 20, kMaxBytes = uint64_t{1} << 30;
  const uint64_t bytes = std::clamp(buffer_kb * 1024 * 2, kMinBytes, kMaxBytes);
  std::unique_ptr<buffer::TraceBuffer> tb = buffer::TraceBuffer::Create(bytes);
  if (tb == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", bytes >> 20, " MiB for the previous boot's events"));
  }
  {
    // Every bundle is moved into the buffer as soon as it is written, so
    // the chunk pool never runs short.
    ProducerBuffer producer(1, buffer::ClientIdentity{}, ProducerBuffer::Options{});
    std::unique_ptr<TraceWriter> writer = producer.CreateTraceWriter(1);
    *stats = reader->ReadAll(writer.get(), [&] { producer.CommitQueuedInto(tb.get()); });
    writer->Flush();
    producer.CommitQueuedInto(tb.get());
  }
  if (stats->events == 0) {
    return absl::NotFoundError("the persistent instance held no event of the previous boot");
  }
  std::unique_ptr<SessionSnapshot> snap(new SessionSnapshot());
  snap->machine_ = machine;
  snap->machine_.boot_id = marker.boot_id;
  if (!marker.machine.empty()) {
    snap->machine_.name = marker.machine;
    if (machine.id_source == "machine_name") snap->machine_.id = MachineIdFromName(marker.machine);
  }
  snap->scan_processes_ = false;
  const auto first = static_cast<int64_t>(stats->first_ns());
  const auto last = static_cast<int64_t>(stats->last_ns());
  const int64_t realtime_offset = marker.realtime_ns - marker.boottime_ns;
  snap->started_at_ns_ = first;
  snap->cloned_at_ns_ = last;
  snap->start_clocks_ = ClockSnapshotPacketAt(first, first + realtime_offset);
  snap->clocks_ = ClockSnapshotPacketAt(last, last + realtime_offset);
  snap->trigger_ = SnapshotTrigger{kPreviousBootTrigger, "ringside agent", 0, last};
  // What was recorded: the boot ring's events, into one buffer of the
  // instance's size.
  config::TraceConfig& config = snap->config_;
  config.add_buffers()->set_size_kb(static_cast<uint32_t>(std::min<uint64_t>(buffer_kb, ~0u)));
  config::DataSourceConfig* ds = config.add_data_sources()->mutable_config();
  ds->set_name("linux.ftrace");
  for (const std::string& e : BootRecorder::Events())
    ds->mutable_ftrace_config()->add_ftrace_events(e);
  snap->stats_ = TraceStatsPacket(last, {}, {tb.get()}, nullptr);
  snap->buffers_.push_back(std::move(tb));
  return snap;
}

}  // namespace ringside::agent
