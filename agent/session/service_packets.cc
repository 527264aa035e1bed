#include "agent/session/service_packets.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "buffer/trace_packet.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t BoottimeNowNs() { return ClockNs(CLOCK_BOOTTIME); }

TracePacket TraceUuidPacket() {
  TracePacket uuid;
  std::random_device rd;
  const uint64_t msb = uint64_t{rd()} << 32 | rd();
  const uint64_t lsb = uint64_t{rd()} << 32 | rd();
  uuid.mutable_trace_uuid()->set_msb(static_cast<int64_t>(msb));
  uuid.mutable_trace_uuid()->set_lsb(static_cast<int64_t>(lsb));
  return uuid;
}

TracePacket SystemInfoPacket(const MachineIdentity& machine) {
  TracePacket info;
  trace::SystemInfo* si = info.mutable_system_info();
  si->set_machine_name(machine.name);
  if (!machine.boot_id.empty()) si->set_boot_id(machine.boot_id);
  si->set_machine_id_source(machine.id_source);
  utsname u;
  if (uname(&u) == 0) {
    auto* un = si->mutable_utsname();
    un->set_sysname(u.sysname);
    un->set_version(u.version);
    un->set_release(u.release);
    un->set_machine(u.machine);
    si->set_hostname(u.nodename);
  }
  si->set_tracing_service_version(absl::StrCat("ringside ", base::kVersion));
  si->set_page_size(static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  si->set_num_cpus(static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_CONF)));
  time_t now = time(nullptr);
  tm local;
  localtime_r(&now, &local);
  si->set_timezone_off_mins(static_cast<int32_t>(local.tm_gmtoff / 60));
  return info;
}

TracePacket ClockSnapshotPacket() {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ClockNs(CLOCK_BOOTTIME)));
  trace::ClockSnapshot* s = packet.mutable_clock_snapshot();
  for (auto [id, clock] : {std::pair{trace::ClockSnapshot::Clock::BOOTTIME, CLOCK_BOOTTIME},
                           std::pair{trace::ClockSnapshot::Clock::MONOTONIC, CLOCK_MONOTONIC},
                           std::pair{trace::ClockSnapshot::Clock::REALTIME, CLOCK_REALTIME}}) {
    trace::ClockSnapshot::Clock* c = s->add_clocks();
    c->set_clock_id(id);
    c->set_timestamp(static_cast<uint64_t>(ClockNs(clock)));
  }
  s->set_primary_trace_clock(trace::BUILTIN_CLOCK_BOOTTIME);
  return packet;
}

TracePacket ClockSnapshotPacketAt(int64_t boottime_ns, int64_t realtime_ns) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(boottime_ns));
  trace::ClockSnapshot* s = packet.mutable_clock_snapshot();
  for (auto [id, ns] : {std::pair{trace::ClockSnapshot::Clock::BOOTTIME, boottime_ns},
                        std::pair{trace::ClockSnapshot::Clock::REALTIME, realtime_ns}}) {
    trace::ClockSnapshot::Clock* c = s->add_clocks();
    c->set_clock_id(id);
    c->set_timestamp(static_cast<uint64_t>(ns));
  }
  s->set_primary_trace_clock(trace::BUILTIN_CLOCK_BOOTTIME);
  return packet;
}

TracePacket TraceConfigPacket(const config::TraceConfig& config) {
  TracePacket packet;
  *packet.mutable_trace_config() = config;
  return packet;
}

TracePacket TracingStartedPacket(int64_t ts) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ts));
  packet.mutable_service_event()->set_tracing_started(true);
  return packet;
}

TracePacket TracingDisabledPacket(int64_t ts) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ts));
  packet.mutable_service_event()->set_tracing_disabled(true);
  return packet;
}

TracePacket CloneSnapshotTriggerPacket(const std::string& name, const std::string& producer_name,
                                       int32_t uid, int64_t ts) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ts));
  trace::Trigger* t = packet.mutable_clone_snapshot_trigger();
  t->set_trigger_name(name);
  t->set_producer_name(producer_name);
  t->set_trusted_producer_uid(uid);
  return packet;
}

std::vector<EventLoss> EventLosses(const std::vector<SourceStats>& sources,
                                   const BufferPacketReader& reader) {
  std::vector<EventLoss> out;
  for (const SourceStats& s : sources) {
    for (const DataSource::EventTally& t : s.written) {
      if (t.pool_dropped != 0) {
        out.push_back({s.data_source, t.cpu, t.kind, "chunk_pool", t.pool_dropped});
      }
      const uint64_t read = reader.events_of(s.producer_id, t.cpu, t.field);
      // More read than committed cannot be; were it so, it is no loss.
      if (t.committed > read) {
        out.push_back({s.data_source, t.cpu, t.kind, "buffer", t.committed - read});
      }
    }
  }
  return out;
}

namespace {

void AddEventLosses(const std::vector<EventLoss>& event_losses, trace::TraceStats* stats) {
  for (const EventLoss& l : event_losses) {
    auto* e = stats->add_ringside_event_loss();
    e->set_data_source(l.data_source);
    e->set_cpu(l.cpu);
    e->set_kind(l.kind);
    e->set_stage(l.stage);
    e->set_events_lost(l.events);
  }
}

void AddEventsSeen(const std::vector<SourceStats>& sources, trace::TraceStats* stats) {
  for (const SourceStats& s : sources) {
    for (const DataSource::KindCount& c : s.seen) {
      auto* e = stats->add_ringside_events_seen();
      e->set_data_source(s.data_source);
      e->set_cpu(c.cpu);
      e->set_kind(c.kind);
      e->set_events(c.events);
    }
  }
}

// Each source's chunk pool and reader (ringside_producer_stats), and its
// staging losses (ringside_staging_loss).
void AddSourceStats(const SourceStats& s, trace::TraceStats* stats) {
  auto* p = stats->add_ringside_producer_stats();
  p->set_data_source(s.data_source);
  p->set_chunks_committed(s.producer.chunks_committed);
  p->set_pool_exhausted(s.producer.pool_exhausted);
  p->set_stall_timeouts(s.producer.stall_timeouts);
  p->set_stalls(s.producer.stalls);
  p->set_stalled_ns(s.producer.stall_ns);
  p->set_consumer_cpu_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(s.consumer.cpu)));
  if (s.consumer.pauses > 0) {
    p->set_consumer_paused_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(s.consumer.paused)));
    p->set_consumer_pauses(s.consumer.pauses);
  }
  if (s.stacks.recorded) {
    auto* st = stats->add_ringside_stack_stats();
    st->set_data_source(s.data_source);
    st->set_blocked_samples(s.stacks.blocked_samples);
    st->set_cpu_samples(s.stacks.cpu_samples);
    st->set_blocked_period_ns(s.stacks.blocked_period_ns);
    st->set_blocked_at_switch(s.stacks.blocked_at_switch);
    st->set_blocked_unsampled(s.stacks.blocked_unsampled);
    st->set_blocked_unsampled_ns(s.stacks.blocked_unsampled_ns);
    st->set_user_frames_unmapped(s.stacks.user_frames_unmapped);
    st->set_maps_reads(s.stacks.maps_reads);
    st->set_maps_unreadable(s.stacks.maps_unreadable);
    st->set_binaries_unreadable(s.stacks.binaries_unreadable);
    st->set_processes_evicted(s.stacks.processes_evicted);
  }
  for (const DataSource::Loss& l : s.losses) {
    auto* loss = stats->add_ringside_staging_loss();
    loss->set_data_source(s.data_source);
    loss->set_cpu(l.cpu);
    loss->set_kind(l.kind);
    loss->set_events_lost(l.events);
  }
}

void AddDurableStats(const buffer::DurableStore::Stats& d, trace::TraceStats* stats) {
  auto* ds = stats->mutable_ringside_durable_buffer();
  ds->set_capacity(d.capacity);
  ds->set_bytes(d.bytes);
  ds->set_max_bytes(d.max_bytes);
  ds->set_entries(d.entries);
  ds->set_writes(d.writes);
  ds->set_replaced(d.replaced);
  ds->set_compacted(d.compacted);
  ds->set_evicted_ended(d.evicted_ended);
  ds->set_evicted_live(d.evicted_live);
  ds->set_rejected(d.rejected);
}

void AddBufferStats(const buffer::TraceBuffer::Stats& s, trace::TraceStats* stats) {
  auto* bs = stats->add_buffer_stats();
  bs->set_buffer_size(s.buffer_size);
  bs->set_bytes_written(s.bytes_written);
  bs->set_bytes_overwritten(s.bytes_overwritten);
  bs->set_bytes_read(s.bytes_read);
  bs->set_padding_bytes_written(s.padding_bytes_written);
  bs->set_padding_bytes_cleared(s.padding_bytes_cleared);
  bs->set_chunks_written(s.chunks_written);
  bs->set_chunks_rewritten(s.chunks_rewritten);
  bs->set_chunks_relocated(s.chunks_relocated);
  bs->set_chunks_overwritten(s.chunks_overwritten);
  bs->set_chunks_discarded(s.chunks_discarded);
  bs->set_chunks_read(s.chunks_read);
  bs->set_chunks_committed_out_of_order(s.chunks_committed_out_of_order);
  bs->set_write_wrap_count(s.write_wrap_count);
  bs->set_patches_succeeded(s.patches_succeeded);
  bs->set_patches_failed(s.patches_failed);
  bs->set_readaheads_succeeded(s.readaheads_succeeded);
  bs->set_readaheads_failed(s.readaheads_failed);
  bs->set_abi_violations(s.abi_violations);
  bs->set_trace_writer_packet_loss(s.trace_writer_packet_loss);
  bs->set_data_loss_read_gap(s.data_loss_read_gap);
  bs->set_data_loss_chunk_corrupted(s.data_loss_chunk_corrupted);
  bs->set_data_loss_orphan_continuation(s.data_loss_orphan_continuation);
  bs->set_data_loss_reassembly_gap(s.data_loss_reassembly_gap);
  bs->set_data_loss_reassembly_broken_chain(s.data_loss_reassembly_broken_chain);
  bs->set_data_loss_overwrite(s.data_loss_overwrite);
  bs->set_data_loss_missing_chunks(s.data_loss_missing_chunks);
}

}  // namespace

TracePacket TraceStatsPacket(int64_t ts, const std::vector<SourceStats>& sources,
                             const std::vector<const buffer::TraceBuffer*>& buffers,
                             const buffer::DurableStore* durable,
                             const std::vector<EventLoss>* event_losses) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(ts));
  trace::TraceStats* stats = packet.mutable_trace_stats();
  if (event_losses != nullptr) {
    AddEventLosses(*event_losses, stats);
    AddEventsSeen(sources, stats);
  }
  for (const SourceStats& s : sources) AddSourceStats(s, stats);
  if (durable != nullptr) AddDurableStats(durable->stats(), stats);
  for (const buffer::TraceBuffer* b : buffers) AddBufferStats(b->stats(), stats);
  stats->set_total_buffers(static_cast<uint32_t>(buffers.size()));
  return packet;
}

void AppendServicePacket(TracePacket packet, uint32_t machine_id, std::string* out) {
  packet.set_trusted_packet_sequence_id(kServiceSequenceId);
  if (machine_id != 0) packet.set_machine_id(machine_id);
  buffer::AppendFramedPacket(packet.SerializeAsString(), out);
}

}  // namespace ringside::agent
