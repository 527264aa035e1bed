// TracingSession's snapshots (CLONE_SNAPSHOT): the buffers cloned
// copy-on-write at one moment, and the clone written as a whole trace.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/descriptors/process_scan.h"
#include "agent/session/tracing_session.h"

namespace ringside::agent {

using trace::TracePacket;

absl::StatusOr<std::unique_ptr<SessionSnapshot>> TracingSession::CloneSnapshot(
    const SnapshotTrigger& trigger) {
  const State state = state_.load();
  if (state != State::kStarted && state != State::kStopped) {
    return absl::FailedPreconditionError("a snapshot needs a started or stopped session");
  }
  std::unique_ptr<SessionSnapshot> snap(new SessionSnapshot());
  if (state == State::kStarted) {
    // The freshest data: what the kernel staged but no reader has read yet
    // (a drain period's worth), then what writers hold in open chunks.
    const absl::Time deadline = absl::Now() + kStagingFlushLimit;
    for (SourceSlot& slot : sources_.slots) {
      if (slot.source == nullptr) continue;
      if (!slot.source->FlushStaging(std::max(deadline - absl::Now(), absl::ZeroDuration()))) {
        snap->sources_not_flushed_++;
      }
    }
    Flush();
  }
  snap->trigger_ = trigger;
  snap->config_ = config_;
  snap->machine_ = machine_;
  snap->durable_ = tracker_ != nullptr;
  snap->started_at_ns_ = start_boottime_ns_;
  snap->cloned_at_ns_ = BoottimeNowNs();
  snap->start_clocks_ = start_clocks_;
  snap->clocks_ = ClockSnapshotPacket();
  const std::vector<SourceStats> sources = CollectSourceStats();
  std::vector<std::unique_ptr<buffer::TraceBuffer::CloneCopier>> copiers;
  {
    // The writers wait only for this: per-sequence state and stats.
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) {
      if (b->clone_in_progress()) {
        return absl::FailedPreconditionError("another snapshot is being cloned");
      }
    }
    for (const auto& b : buffers_) {
      // Everything the ring still holds, whether a streaming drain read it
      // already or not: a snapshot's window is the ring's, not what is left
      // since the last drain.
      std::unique_ptr<buffer::TraceBuffer> clone =
          b->BeginClone(buffer::TraceBuffer::CloneScope::kEverything);
      if (clone == nullptr) {
        snap->buffers_.clear();
        for (const auto& other : buffers_) other->ContinueClone(1);  // Ends the abandoned ones.
        return absl::ResourceExhaustedError(absl::StrCat(
            "cannot clone a ", b->size() >> 20, " MiB buffer: out of memory or address space"));
      }
      snap->buffers_.push_back(std::move(clone));
    }
    for (const auto& b : buffers_) copiers.push_back(b->clone_copier());
  }
  // The bytes follow without the writers' lock: a write meanwhile first
  // preserves what it changes (copy-on-write), waiting only for a block
  // being copied. Taking the lock for each step instead made the writers
  // block on it thousands of times per snapshot, and a blocked thread's
  // wake-up can take milliseconds on a busy (or virtual) machine.
  for (const auto& clone : snap->buffers_) clone->PrefaultCloneMemory();
  for (const auto& copier : copiers) {
    if (copier == nullptr) continue;  // Nothing to copy: complete at once.
    while (!copier->CopySome(kCloneStepBytes)) {
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& b : buffers_) b->ContinueClone(kCloneStepBytes);  // Ends it on their side.
  }
  std::vector<const buffer::TraceBuffer*> clones;
  for (const auto& b : snap->buffers_) clones.push_back(b.get());
  snap->stats_ = TraceStatsPacket(snap->cloned_at_ns_, sources, clones,
                                  snap->durable_ ? snap->buffers_[0]->durable() : nullptr);
  return snap;
}

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
  if (!durable_) emit(ScanProcesses());
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
