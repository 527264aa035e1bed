#ifndef RINGSIDE_AGENT_SESSION_SERVICE_PACKETS_H_
#define RINGSIDE_AGENT_SESSION_SERVICE_PACKETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agent/session/buffer_reader.h"
#include "agent/session/machine_identity.h"
#include "agent/session/sequence_ids.h"
#include "agent/sources/data_source.h"
#include "agent/writer/producer_buffer.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// The packets a session writes itself, around the data of its buffers:
//
//   preamble:  trace_uuid, system_info, clock_snapshot, the effective
//              trace_config, (a /proc scan), service_event(tracing_started)
//   data:      the buffers' packets (BufferPacketReader)
//   trailer:   a /proc scan, clock_snapshot, trace_stats,
//              service_event(tracing_disabled)
//
// A snapshot (SessionSnapshot) ends its preamble with the
// clone_snapshot_trigger packet and its data with the clone's
// clock_snapshot and trace_stats. Clock snapshots are always in time order
// (the importer refuses one older than the last): the preamble's is the
// session's start, the buffers' own come between.
//
// They go on sequence kServiceSequenceId (sequence_ids.h). Every packet
// carries the machine's id (MachineIdentity), these from
// AppendServicePacket, the rest from BufferPacketReader.

int64_t BoottimeNowNs();

// A random trace_uuid: each file is one trace to the importer.
trace::TracePacket TraceUuidPacket();
// This machine: its name and boot id (`machine`), uname, hostname,
// ringside's version, page size, CPUs, time zone.
trace::TracePacket SystemInfoPacket(const MachineIdentity& machine);
// BOOTTIME (the trace's clock), MONOTONIC and REALTIME read together, so
// tools can line the trace up with wall time.
trace::TracePacket ClockSnapshotPacket();
// A clock snapshot of another time, or another boot: BOOTTIME `boottime_ns`
// was REALTIME `realtime_ns`.
trace::TracePacket ClockSnapshotPacketAt(int64_t boottime_ns, int64_t realtime_ns);
trace::TracePacket TraceConfigPacket(const config::TraceConfig& config);
// service_event(tracing_started) or (tracing_disabled) at `ts`.
trace::TracePacket TracingStartedPacket(int64_t ts);
trace::TracePacket TracingDisabledPacket(int64_t ts);
// clone_snapshot_trigger: the trigger a snapshot was taken for, stamped
// with the trigger's time `ts`.
trace::TracePacket CloneSnapshotTriggerPacket(const std::string& name,
                                              const std::string& producer_name, int32_t uid,
                                              int64_t ts);

// What the trace_stats packet is made of: each source's staging losses and
// chunk pool, each buffer's stats, the durable store's.
struct SourceStats {
  std::string data_source;  // The config's name.
  ProducerBuffer::Stats producer;
  std::vector<DataSource::Loss> losses;
  buffer::ProducerID producer_id = 0;
  std::vector<DataSource::EventTally> written;
  std::vector<DataSource::KindCount> seen;
  DataSource::ConsumerCpu consumer;
  DataSource::StackReport stacks;
};
// Events each source wrote that `reader` (which read everything the
// buffers will ever give: the end of a recording) did not read, by source,
// CPU, kind and stage ("chunk_pool", "buffer"); only non-zero entries.
struct EventLoss {
  std::string data_source;
  uint32_t cpu = 0;
  std::string kind;
  std::string stage;
  uint64_t events = 0;
};
std::vector<EventLoss> EventLosses(const std::vector<SourceStats>& sources,
                                   const BufferPacketReader& reader);
// `event_losses` (may be null: not known) go into ringside_event_loss, and
// then each source's `seen` into ringside_events_seen (they close its count
// only beside the losses).
trace::TracePacket TraceStatsPacket(int64_t ts, const std::vector<SourceStats>& sources,
                                    const std::vector<const buffer::TraceBuffer*>& buffers,
                                    const buffer::DurableStore* durable,
                                    const std::vector<EventLoss>* event_losses = nullptr);

// Frames `packet` on the service sequence, from machine `machine_id`
// (MachineIdentity; 0: none), and appends it to `out`.
void AppendServicePacket(trace::TracePacket packet, uint32_t machine_id, std::string* out);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_SERVICE_PACKETS_H_
