#ifndef RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_WRITER_H_
#define RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_WRITER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/output/file_retention.h"
#include "agent/output/output_dir.h"
#include "agent/session/tracing_session.h"
#include "agent/snapshots/trigger_tally.h"
#include "agent/tracefile/packet_compression.h"
#include "agent/tracefile/trace_inspector.h"
#include "ringside/trace/trace_stats.pb.h"

namespace ringside::agent {

// The file name of a snapshot taken at `when` for `reason`:
// "<hostname>-<UTC yyyymmddThhmmssZ>-<reason>.pftrace", the reason cut to 48
// bytes and reduced to [A-Za-z0-9._-] (anything else becomes '_'), so a
// name sorts by time and says why, and no reason can leave the directory.
std::string SnapshotFileName(absl::string_view hostname, absl::Time when, absl::string_view reason);

// A snapshot file lists at most this many of the triggers it answers (the
// one that made it and those that joined it); the rest are only counted.
inline constexpr size_t kMaxTriggersListedPerSnapshot = 256;

// Writes CLONE_SNAPSHOTs of a running session into a directory: the clone is
// taken at once, on the caller's thread; the file is written on the
// writer's own thread, into a temporary file renamed into place when whole
// (OutputFile), so a reader never sees part of one under its final name.
// The directory is opened and checked at each Take() (OutputDir: refused
// unless only the agent's user can write it; made again if it was
// removed), and the file is created and named relative to it, never
// through a symlink nor over anything found at its name.
//
// At most one clone waits while another is written: a request that comes
// meanwhile joins the waiting one (same file) when that clone was taken at
// or after the request's trigger, or else replaces its data with a fresh
// clone (same file, now holding what the trigger is about; the stale clone
// is freed before the fresh one is taken). So a burst of requests never
// holds more than two clones (the one written, the one waiting), and every
// trigger's moment is in some file. One clone is taken at a time; a second caller
// waits for it and joins it.
//
// Each file's trace_stats also carry, besides the session's figures, the
// triggers the file answers (every one that joined it) and the tally of
// all requests so far (ringside_snapshot_triggers, ringside_triggers).
//
// Thread-safe.
class SnapshotWriter {
 public:
  struct Result {
    absl::Status status;
    // Where the file is. The path Take() returned, unless something took
    // that name while the file was written: then the next free name.
    std::string path;
    std::string reason;
    std::string taken_path;  // What Take() returned.
    // Of the file's sidecar (trace_sidecar.h), written after it: until it
    // is, the file is not finished to a shipper.
    absl::Status sidecar;
    // The span the file holds whole, from the summary its sidecar was made
    // of; unset when the sidecar was not written. Only this of the summary
    // is kept (not its pid sets and process maps): the last few Results
    // stay in memory for Outcome().
    struct Held {
      std::optional<uint64_t> from_ns;            // TraceSummary::HeldFrom().
      std::optional<uint64_t> until_ns;           // Its last_timestamp_ns.
      std::optional<int64_t> realtime_offset_ns;  // Its realtime_offset_last_ns.
      // Whether it holds `window` whole (as TraceSummary::Holds).
      bool Holds(const TraceSummary::Window& window) const;
    };
    std::optional<Held> held;
  };
  struct Stats {
    uint64_t written = 0;
    uint64_t failed = 0;
    uint64_t sidecars_failed = 0;    // Files written whose sidecar was not.
    std::string last_sidecar_error;  // Why the last of those; empty while none.
    uint64_t joined = 0;             // Requests that joined (or refreshed) a waiting snapshot.
    uint64_t deleted_files = 0;      // By retention.
    uint64_t deleted_bytes = 0;
    std::string last_path;
    std::string last_reason;
    // Why the last failed snapshot failed; empty while none has.
    std::string last_error;
    // Compression, on this writer's thread: the codec, packets in, bytes
    // out, CPU.
    PacketCodec codec = PacketCodec::kNone;
    uint64_t compressed_in_bytes = 0;
    uint64_t compressed_out_bytes = 0;
    uint64_t compression_cpu_ns = 0;
  };

  // `session` outlives the writer; files are named after its config's
  // machine_name, else the host name (FileHost::Local). `on_done` is called on the writer's
  // thread after each file is written or has failed. `tally`, if not null,
  // outlives the writer: Take() counts each request there as fired or
  // joined, and every file carries it as of its write.
  SnapshotWriter(TracingSession* session, std::string output_dir,
                 std::function<void(const Result&)> on_done, TriggerTally* tally = nullptr);
  // Finish()es.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Clones the session and queues its file. Returns the path it will have.
  // Errors: kFailedPrecondition once Finish() was called or when the
  // session cannot be cloned; the output directory's problems (it cannot be
  // created, is not a directory) naming it.
  // `reason` names the file; `trigger` goes into it (clone_snapshot_trigger),
  // and its name is the Result's and the stats' reason.
  // `joined`: triggers that already joined this one before it was taken
  // (counted by the caller); the file lists them after `trigger`.
  // `window` (`ringside snapshot --around`): the span the requester asks
  // the file to hold; the file lists it (ringside_snapshot_windows), and
  // says whether it holds it whole.
  // `tally_as`: the tally's row the request counts in; empty: the
  // trigger's name. A request by hand counts as "request" whatever its
  // reason, which is the client's text.
  absl::StatusOr<std::string> Take(absl::string_view reason, const SnapshotTrigger& trigger,
                                   const std::vector<SnapshotTrigger>& joined = {},
                                   std::optional<TraceSummary::Window> window = std::nullopt,
                                   absl::string_view tally_as = {});
  // The same for a trigger the agent fired itself: named `reason`, by
  // "ringside agent", with the agent's uid, now.
  absl::StatusOr<std::string> Take(absl::string_view reason);
  // Queues a snapshot made elsewhere (SessionSnapshot::OfPreviousBoot: an
  // earlier boot's events), named `reason` at `when` (the wall-clock time
  // it is of) and counted in the tally as its trigger fired. Written,
  // compressed, given its sidecar and kept by retention as a clone is;
  // never joined nor replaced by a later Take().
  absl::StatusOr<std::string> Put(absl::string_view reason,
                                  std::unique_ptr<SessionSnapshot> snapshot, absl::Time when);
  // Blocks until the snapshot of `path` (from Take()) is written or failed,
  // at most `timeout` (kDeadlineExceeded). Returns where it was written
  // (Result::path), or why not.
  absl::StatusOr<std::string> Wait(const std::string& path, absl::Duration timeout);
  // The outcome of the snapshot of `path` (from Take()) once written or
  // failed (one of the last few); nullopt before.
  std::optional<Result> Outcome(const std::string& path) const;

  // Snapshots taken from now on go there (config reload).
  void set_output_dir(std::string dir);
  // After each file: at most this many snapshots / bytes of them in the
  // output directory, the oldest deleted (snapshot_retention.h); 0: no
  // limit.
  void set_retention(uint32_t max_files, uint64_t max_bytes);
  // Files written from now on are 0640 owned by `group` (output_group), and
  // directories made for them are owned by it; nullopt: files 0600.
  void set_output_group(std::optional<gid_t> group);
  // Files written from now on are compressed so (PacketCompressionOf the
  // config); kNone: not at all.
  void set_compression(PacketCompression compression);
  Stats stats() const;
  // Writes, on the writer's thread before the next snapshot, the sidecars
  // that this host's snapshots in the output directory lack (left by an
  // agent killed between a file and its sidecar, or by one from before
  // sidecars), and with `stream_files` those its streaming files lack (an
  // agent that does not stream finishes its predecessor's; one that streams
  // leaves them to its stream, RotatingTraceFile). A directory that does not
  // exist yet is left alone.
  void FinishOldSnapshots(bool stream_files);
  // The most clones this writer has held in memory at once (the one being
  // written, the one waiting, one being taken): at most 2 by design.
  int peak_clones_held_ForTesting() const { return peak_clones_held_.load(); }

  // Writes what is queued, then stops the thread. Idempotent.
  void Finish();

 private:
  struct Pending {
    std::shared_ptr<const OutputDir> dir;
    std::string name;  // In dir.
    std::string path;  // dir's path and name, as callers know it.
    std::string reason;
    std::unique_ptr<SessionSnapshot> snapshot;
    // Every trigger it answers, in the order they came; at most
    // kMaxTriggersListedPerSnapshot.
    std::vector<SnapshotTrigger> triggers;
    // The windows asked of it; at most kMaxTriggersListedPerSnapshot.
    std::vector<TraceSummary::Window> windows;
    // Why `snapshot` is null: its clone was dropped for a fresher one
    // whose taking failed.
    absl::Status clone_error;
    // A clone of the session, which later requests may join or refresh;
    // false for one Put() there.
    bool joinable = true;
  };
  // Appends to `pending`'s triggers up to the limit.
  static void ListTriggers(const SnapshotTrigger& trigger,
                           const std::vector<SnapshotTrigger>& joined,
                           const std::optional<TraceSummary::Window>& window, Pending* pending);
  void Loop();
  // The writer thread's steps for each file. NextToWrite() waits for the
  // next snapshot to write, doing FinishOldSnapshots()'s work meanwhile,
  // and hands it out with the group and compression its file gets; false
  // once finishing with nothing left.
  bool NextToWrite(Pending* next, std::optional<gid_t>* group, PacketCompression* compression);
  // Compression's figures of one file (Stats' compressed_*).
  struct CompressedBytes {
    uint64_t in_bytes = 0;
    uint64_t out_bytes = 0;
    uint64_t cpu_ns = 0;
  };
  // Writes `next`'s file and frees its clone; the outcome goes into
  // `result`. REQUIRES: next->snapshot is set.
  void WriteFile(Pending* next, std::optional<gid_t> group, const PacketCompression& compression,
                 Result* result, CompressedBytes* compressed);
  // Of a file written whole: its sidecar (into `result`), then retention.
  PruneResult FinishFile(const OutputDir& dir, std::optional<gid_t> group, Result* result);
  // Counts the file's outcome in the stats and remembers it for Wait().
  void Record(const Result& result, const CompressedBytes& compressed, const PruneResult& pruned);
  // FinishOldSnapshots()'s work, on the writer's thread.
  void WriteMissingSidecars(const std::string& dir, std::optional<gid_t> group, bool stream_files);
  // What the file of a snapshot answering `triggers` adds to its
  // trace_stats: the triggers and the tally as of now.
  trace::TraceStats ExtraStats(const Pending& pending) const;
  // Take()'s and Put()'s end: a file named for `reason` at `when`, its
  // outcome forgotten, the request tallied as `tally_as`, `snapshot` queued
  // with the triggers it answers. Returns its path.
  absl::StatusOr<std::string> QueueLocked(absl::string_view reason, absl::Time when,
                                          std::unique_ptr<SessionSnapshot> snapshot,
                                          const SnapshotTrigger& trigger,
                                          const std::vector<SnapshotTrigger>& joined,
                                          const std::optional<TraceSummary::Window>& window,
                                          absl::string_view tally_as, bool joinable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens the output directory and picks a free name in it for `reason`
  // at `when`.
  absl::Status ChooseFileLocked(absl::string_view reason, absl::Time when, Pending* pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TracingSession* const session_;
  const std::function<void(const Result&)> on_done_;
  TriggerTally* const tally_;
  const uint64_t reserve_bytes_;
  // Whose files: the session's machine_name (it takes a restart), else the
  // host name.
  const FileHost host_;

  mutable absl::Mutex mu_;
  std::string output_dir_ ABSL_GUARDED_BY(mu_);
  uint32_t max_files_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t max_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<gid_t> group_ ABSL_GUARDED_BY(mu_);
  PacketCompression compression_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::string writing_ ABSL_GUARDED_BY(mu_);  // Path of the file being written.
  // Finished files' outcomes, by path, for Wait(); the last few only.
  std::deque<Result> done_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool old_snapshots_to_finish_ ABSL_GUARDED_BY(mu_) = false;
  bool old_stream_files_to_finish_ ABSL_GUARDED_BY(mu_) = false;
  // A Take() is cloning the session, outside mu_.
  bool cloning_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Clones alive now, and the most at once (peak_clones_held_ForTesting).
  std::atomic<int> clones_held_{0};
  std::atomic<int> peak_clones_held_{0};
  void CountClone();
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_WRITER_H_
