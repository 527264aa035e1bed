#ifndef RINGSIDE_AGENT_SESSION_BUFFER_READER_H_
#define RINGSIDE_AGENT_SESSION_BUFFER_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "agent/tracefile/trace_sink.h"
#include "buffer/trace_buffer.h"

namespace ringside::agent {

// Reads the packets out of a session's buffers (or a clone of them) as
// framed TracePackets for a file: each gets the trusted fields of its
// sequence appended (trusted_packet_sequence_id, trusted_uid and
// trusted_pid, previous_packet_dropped with the loss flags), as fields
// appended to a serialized message merge into it. Sequence ids are given
// out per {producer, writer} in order of first appearance from
// kFirstDataSequenceId on; the durable store's sequence is
// kDescriptorSequenceId (sequence_ids.h).
//
// Reading consumes what was read, so each call appends only what is new.
// One reader per output: its ids are that file's. Not thread-safe.
class BufferPacketReader {
 public:
  // Appends every packet not read before from `buffers`, in order: each
  // buffer's pass (its durable descriptors first), one buffer after another.
  void ReadInto(const std::vector<buffer::TraceBuffer*>& buffers, std::string* out);
  // The same, writing *out into `sink` (and clearing it) whenever it holds
  // `batch_bytes` or more, so that a large buffer is never copied whole into
  // memory; what is left under `batch_bytes` stays in *out. Returns the
  // sink's error, after which reading stops.
  absl::Status WriteInto(const std::vector<buffer::TraceBuffer*>& buffers, std::string* out,
                         TraceSink* sink, size_t batch_bytes);
  // Like ReadInto(), but stops once *out has grown by `max_bytes` or more
  // (whole packets): a caller holding the buffers' lock can let it go
  // between batches. Returns true when everything was read; false when
  // stopped short, the next call going on where this one stopped (in the
  // same read pass when nothing was written meanwhile, else in a new one,
  // which skips what was read). REQUIRES: the same `buffers` each call.
  bool ReadSome(const std::vector<buffer::TraceBuffer*>& buffers, std::string* out,
                size_t max_bytes);

  // Appends every descriptor of `store` (the durable store beside one of
  // the buffers) as that buffer's read pass would, and marks them read: the
  // start of a new file of a stream, which must name every task before its
  // first event, and begins each sequence's interned data anew.
  void ReadAllDescriptors(buffer::DurableStore* store, std::string* out);

  // Every packet framed from now on carries machine_id `id`
  // (MachineIdentity); 0: none.
  void set_machine_id(uint32_t id) { machine_id_ = id; }

  uint64_t packets() const { return packets_; }
  // Kernel events in the packets read (CountEventsInPacket).
  uint64_t events() const { return events_; }
  // The same, of one producer's packets, by the CPU of their bundle and the
  // FtraceEvent field they are written as (CountEventsByKind).
  uint64_t events_of(buffer::ProducerID producer, uint32_t cpu, uint32_t field) const;

 private:
  // The loop of the three above; `max_bytes` 0: no limit. Sets *all_read.
  absl::Status Read(const std::vector<buffer::TraceBuffer*>& buffers, std::string* out,
                    TraceSink* sink, size_t batch_bytes, size_t max_bytes, bool* all_read);
  // Adds the trusted fields of the packet in scratch_ and frames it into
  // *out.
  void FramePacket(const buffer::PacketSequenceProperties& props, uint32_t loss, std::string* out);

  std::map<uint32_t, uint32_t> sequence_ids_;  // By producer << 16 | writer.
  // Sequences whose interned data this output has begun (by the same key).
  absl::flat_hash_set<uint32_t> interned_started_;
  uint32_t machine_id_ = 0;
  uint64_t packets_ = 0;
  uint64_t events_ = 0;
  // By EventKey(): producer, CPU, FtraceEvent field.
  absl::flat_hash_map<uint64_t, uint64_t> events_by_kind_;
  std::string scratch_;
  // The buffer whose read pass a ReadSome() batch stopped in (SIZE_MAX:
  // none; the next read starts a pass of every buffer).
  size_t resume_at_ = SIZE_MAX;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_BUFFER_READER_H_
