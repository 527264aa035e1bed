#ifndef RINGSIDE_AGENT_TRACEFILE_TRACE_INSPECTOR_H_
#define RINGSIDE_AGENT_TRACEFILE_TRACE_INSPECTOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/tracefile/file_digest.h"
#include "agent/tracefile/stack_summary.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// What `ringside inspect` reports about a trace: counts by packet type and by
// sequence, losses, time range, named processes and threads, non-zero stats.
struct TraceSummary {
  struct Sequence {
    uint64_t packets = 0;
    // Packets carrying a non-zero previous_packet_dropped.
    uint64_t dropped_marks = 0;
  };
  struct Thread {
    int32_t tgid = 0;
    std::string name;
  };
  using StatValue = std::variant<uint64_t, int64_t, double>;

  uint64_t packets = 0;
  // Bytes of the file, as stored, that were read as whole packets (of a
  // gzip'd file, the compressed bytes read; compression says what they
  // inflated to).
  uint64_t bytes = 0;
  // Key: the name of the TracePacket field that holds the packet's payload
  // ("ftrace_events", "process_tree", ...); "interned_data" for packets that
  // carry only interned data, "field_N" for a Perfetto field ringside does not
  // model, "empty" for none.
  std::map<std::string, uint64_t> packets_by_type;
  // Key: trusted_packet_sequence_id (0: packets written without one).
  std::map<uint32_t, Sequence> sequences;
  // CLOCK_BOOTTIME ns of the earliest and latest packet or ftrace event.
  std::optional<uint64_t> first_timestamp_ns;
  std::optional<uint64_t> last_timestamp_ns;
  // The same of the kernel events alone (ftrace events, compact sched):
  // what the file recorded, without its preamble's packets, which a
  // snapshot or a rotated file stamps with its session's start.
  std::optional<uint64_t> first_event_ns;
  std::optional<uint64_t> last_event_ns;
  // The first kernel event of each CPU (by the bundle's cpu).
  std::map<uint32_t, uint64_t> first_event_ns_by_cpu;
  // The session's tracing_started packet's time, when the file has one.
  std::optional<uint64_t> tracing_started_ns;
  // A buffer had more written into it than it holds (its last
  // trace_stats): the oldest data was let go, read or not.
  bool buffers_wrapped = false;
  // From when the file holds every CPU's events whole (CLOCK_BOOTTIME ns):
  // for a snapshot whose ring never wrapped, since tracing started; else
  // from the latest of the CPUs' first events (before it, some CPU's events
  // were let go, or are in an earlier rotated file). Unset without events.
  std::optional<uint64_t> HeldFrom() const;
  // The windows a snapshot was asked to hold (ringside_snapshot_windows),
  // and whether the file holds one whole: from HeldFrom() to the file's
  // last timestamp (the clone's).
  struct Window {
    uint64_t first_ns = 0;
    uint64_t last_ns = 0;
  };
  std::vector<Window> snapshot_windows;
  bool Holds(const Window& window) const;
  // Whether the span [from_ns, until_ns] holds `window` whole (false while
  // either end is unknown): Holds() of a summary, or of what is kept of one.
  static bool SpanHolds(std::optional<uint64_t> from_ns, std::optional<uint64_t> until_ns,
                        const Window& window);
  // REALTIME minus BOOTTIME, in ns, at the first and the last clock
  // snapshot holding both clocks (unset: none has): how the file is placed
  // beside files of other machines.
  std::optional<int64_t> realtime_offset_first_ns;
  std::optional<int64_t> realtime_offset_last_ns;
  // The time range on REALTIME (Unix time, ns): the first timestamp by the
  // first offset, the last by the last (of the events alone with
  // `events_only`). Unset without timestamps or offsets.
  std::optional<std::pair<int64_t, int64_t>> RealtimeRange(bool events_only = false) const;
  // From process_tree packets; a later entry for the same id replaces an
  // earlier one. Process name: the first cmdline entry.
  std::map<int32_t, std::string> processes;
  std::map<int32_t, Thread> threads;
  // The cgroup and container of the processes whose descriptor names them
  // (ringside's ProcessTree.Process fields; replaced like `processes`).
  struct ProcessCgroup {
    uint64_t cgroup_id = 0;  // 0: unknown.
    std::string cgroup_path;
    std::string container_id;
    std::string pod_uid;
    std::string runtime;
    // Kubernetes names; empty when the file does not name them.
    std::string pod_namespace;
    std::string pod;
    std::string container;
  };
  std::map<int32_t, ProcessCgroup> process_cgroups;
  // The processes of each container, by container id.
  struct Container {
    std::string pod_uid;
    std::string runtime;
    std::string pod_namespace;  // Kubernetes names, as ProcessCgroup's.
    std::string pod;
    std::string name;
    uint64_t processes = 0;
  };
  std::map<std::string, Container> Containers() const;
  // The Kubernetes pods of the processes the file names, by pod UID.
  struct Pod {
    std::string pod_namespace;  // Empty when the file has only the UID.
    std::string name;
    std::set<std::string> containers;  // Names, where known.
    uint64_t processes = 0;
  };
  std::map<std::string, Pod> Pods() const;
  uint64_t ftrace_events = 0;
  uint64_t ftrace_bundles_with_lost_events = 0;
  // Every pid/tid a scheduling event names (switched in or out, woken),
  // the idle tasks (0) left out, and the pids process events give a name
  // (fork, task_newtask, exec, rename). A sched pid in neither these nor
  // `processes`/`threads` is a bare number to whoever reads the trace.
  std::set<int32_t> sched_pids;
  std::set<int32_t> event_named_pids;
  std::vector<int32_t> UnresolvedSchedPids() const;
  // Non-zero numeric fields of the last trace_stats and ftrace_stats packets,
  // in field order, keyed by path ("trace_stats.buffer_stats[0].chunks_read";
  // an entry with a `name` is keyed by it: "trace_stats.ringside_triggers[oom_kill].fired";
  // one with a data_source by it, its kind, stage and cpu, which are then not
  // figures:
  // "trace_stats.ringside_event_loss[linux.bpf/sched_switch/chunk_pool/cpu1].events_lost").
  std::vector<std::pair<std::string, StatValue>> nonzero_stats;
  // The triggers a snapshot file answers (the last trace_stats'
  // ringside_snapshot_triggers); empty for other traces.
  std::vector<trace::TraceStats::SnapshotTrigger> snapshot_triggers;

  // The machine the file comes from: its first system_info packet's name,
  // boot id and kernel, and the machine_id of the packets (by id; 0: packets
  // without one, as files of ringside before 0.1 have).
  struct Machine {
    std::string name;
    std::string boot_id;
    std::string kernel;  // uname's sysname and release.
  };
  std::optional<Machine> machine;
  std::map<uint32_t, uint64_t> packets_by_machine_id;
  // The machine id most packets carry (0: none has one).
  uint32_t MainMachineId() const;

  // Losses the file tells of, from its last trace_stats (figures of the
  // whole session up to the file's end, not of this file alone): events
  // the kernel-side staging dropped, the central buffer's overwritten and
  // discarded chunks, and, in a recording's own file, the events lost
  // between staging and the file (ringside_event_loss).
  struct Losses {
    uint64_t staging_events = 0;
    uint64_t buffer_chunks_overwritten = 0;
    uint64_t buffer_bytes_overwritten = 0;
    uint64_t buffer_chunks_discarded = 0;
    uint64_t events_after_staging = 0;
  };
  Losses losses;
  // Packets of this file that follow a gap in their sequence (the sum of
  // the sequences' dropped_marks).
  uint64_t PacketsAfterAGap() const;

  // The file's own bytes: size and SHA-256 as read (unset when the trace
  // came on standard input, or could not be read again to hash).
  std::optional<FileDigest> digest;

  // Perfetto's compressed packets in the file: how many of each codec, the
  // compressed bytes and the packets they held.
  // A gzip'd file: the compressed bytes read and the trace they inflated to.
  struct Compression {
    uint64_t deflate_packets = 0;
    uint64_t zstd_packets = 0;
    uint64_t compressed_bytes = 0;
    uint64_t inflated_bytes = 0;
    bool gzip = false;
    uint64_t gzip_bytes = 0;
    uint64_t gzip_inflated_bytes = 0;
  };
  Compression compression;

  // The stack samples: totals, the heaviest blocked and CPU stacks, the
  // stacks' losses.
  StackSummary stacks;

  // Set when the file could not be read to its end.
  struct Error {
    uint64_t offset = 0;
    std::string message;
    // The file is no trace at all (its first bytes are no packet): the
    // message says what it is, and there is nothing to summarize.
    bool not_a_trace = false;
  };
  std::optional<Error> error;
};

// Builds a TraceSummary one packet at a time, holding only the summary.
class TraceSummarizer {
 public:
  // Adds one serialized TracePacket found at `offset`. Returns false (and
  // records the error in the summary) if the bytes are not a TracePacket.
  bool AddPacket(const std::string& bytes, uint64_t offset);
  void SetError(uint64_t offset, std::string message, bool not_a_trace = false);

  // The summary of the packets added; `stacks` only after Finish().
  const TraceSummary& summary() const { return summary_; }
  // Resolves the stack samples into the summary's `stacks`, with the
  // `top_stacks` heaviest of each kind.
  void Finish(size_t top_stacks = kTopStacks) { summary_.stacks = stacks_.Finish(top_stacks); }
  static constexpr size_t kTopStacks = 5;

 private:
  void AddTimestamp(uint64_t ts_ns);
  // An event's: also in first_event_ns, last_event_ns.
  void AddEventTimestamp(uint64_t ts_ns, uint32_t cpu);
  // The REALTIME - BOOTTIME offset, when the snapshot holds both clocks.
  void AddClockSnapshot(const trace::ClockSnapshot& snapshot);
  // Event counts, timestamps and the pids the events name.
  void AddFtraceBundle(const trace::FtraceEventBundle& bundle);
  // Processes, their cgroups and threads (a later entry replaces one).
  void AddProcessTree(const trace::ProcessTree& tree);
  void AddStats(const trace::TracePacket& packet);

  TraceSummary summary_;
  StackSummarizer stacks_;
  trace::TracePacket packet_;
  // The last stats seen; flattened into the summary as they arrive.
  std::vector<std::pair<std::string, TraceSummary::StatValue>> trace_stats_;
  std::vector<std::pair<std::string, TraceSummary::StatValue>> ftrace_stats_;
};

// Reads the trace file at `path` to its end (or to its first malformed byte)
// and summarizes it, with its digest. Fails only if the file cannot be
// opened; a corrupt file yields a summary of what was readable with `error`
// set.
// `top_stacks`: the heaviest stacks of each kind the summary lists.
absl::StatusOr<TraceSummary> InspectTraceFile(const std::string& path,
                                              size_t top_stacks = TraceSummarizer::kTopStacks);
// The same of a file the caller opened (relative to a directory, never
// through a symlink): takes `fd` over. `path` names it.
absl::StatusOr<TraceSummary> InspectOpenTraceFile(int fd, const std::string& path,
                                                  size_t top_stacks = TraceSummarizer::kTopStacks);
// The trace in the `size` bytes at `offset` of the open regular file `fd`
// (a TAR archive's member; `fd` stays the caller's), without a digest.
// `name` names it.
absl::StatusOr<TraceSummary> InspectTraceRange(int fd, const std::string& name, uint64_t offset,
                                               uint64_t size,
                                               size_t top_stacks = TraceSummarizer::kTopStacks);

// Renderings of a summary: human-readable text and one JSON object.
std::string SummaryToText(const std::string& path, const TraceSummary& summary);
// Unix time in ns as RFC 3339 UTC, to the microsecond:
// "2026-11-27T17:01:02.123456Z".
std::string FormatRealtime(int64_t unix_ns);
nlohmann::json SummaryToJson(const std::string& path, const TraceSummary& summary);
// The part of SummaryToJson that says what a file is, for shippers and
// indexers (the sidecar next to each agent file holds exactly these):
// "file", "size_bytes", "sha256", "machine", "time_range", "held",
// "snapshot_windows", "compression", "losses", "snapshot_triggers", "pods", "error".
nlohmann::json FileFactsToJson(const std::string& path, const TraceSummary& summary);
// SummaryToJson as text (JsonText: bytes of names that are not UTF-8
// become U+FFFD).
std::string SummaryToJsonText(const std::string& path, const TraceSummary& summary);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_TRACE_INSPECTOR_H_
