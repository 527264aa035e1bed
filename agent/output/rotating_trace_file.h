#ifndef RINGSIDE_AGENT_OUTPUT_ROTATING_TRACE_FILE_H_
#define RINGSIDE_AGENT_OUTPUT_ROTATING_TRACE_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/output/file_retention.h"
#include "agent/output/output_dir.h"
#include "agent/output/output_file.h"
#include "agent/output/trace_sidecar.h"
#include "agent/tracefile/trace_sink.h"

namespace ringside::agent {

// True for a streaming file's name: "<host>-<yyyymmddThhmmssZ>-<seq>.pftrace"
// (AgentFileStem; <seq> is six or more digits), the finished files that
// retention counts. The file being written has ".partial" after it.
bool IsStreamFileName(absl::string_view name, const FileHost& host);

// The agent's streaming output (write_into_file): one trace cut into files
// in a directory, each a whole trace of its own (the session writes each
// one's preamble and trailer, see RotatingSink).
//
//   <dir>/<host>-<UTC time it was opened>-<seq>.pftrace.partial   being written
//        ── FileDue(): max_file_bytes reached or max_file_age passed ──►
//   fsync, renamed to <...>.pftrace (never over an existing name), dir fsynced
//        ── its sidecar <...>.pftrace.json, written on a thread of its own
//           (trace_sidecar.h): from then on the file is finished ──
//        ── retention: max_files / max_total_bytes, the oldest finished files
//           of this host deleted first (the one being written never) ──►
//   the next <...>-<seq+1>.pftrace.partial
//
// So a reader or a shipper that takes only files with a sidecar only ever sees whole files,
// and the file being written is a valid trace up to its last whole packet
// (a full disk cuts a write back to it: OutputFile). Files are created
// O_EXCL|O_NOFOLLOW, 0600 or 0640 with a group: nothing planted in the directory is
// followed or overwritten.
//
// Write(), Finish(), FileDue() and NextFile() from one thread (the
// session's drain); stats() from any.
class RotatingTraceFile : public RotatingSink {
 public:
  struct Options {
    std::string dir;  // Exists (PrepareOutputDir).
    // Files are named after hostname.name(); the finished files of either
    // of its names count (FileHost).
    FileHost hostname;
    uint64_t max_file_bytes = 0;   // 0: no size limit.
    absl::Duration max_file_age;   // Zero: no age limit.
    uint32_t max_files = 0;        // Finished files kept; 0: any number.
    uint64_t max_total_bytes = 0;  // Of finished files kept; 0: any size.
    // Files 0600, or 0640 owned by this group (output_group).
    std::optional<gid_t> group;
    std::function<absl::Time()> now = absl::Now;  // Tests move time.
  };
  struct Stats {
    std::string path;    // The file being written ("" when none is open).
    uint64_t bytes = 0;  // In it.
    uint64_t files_finished = 0;
    uint64_t bytes_finished = 0;  // In all the files finished.
    uint64_t files_deleted = 0;   // By retention.
    uint64_t bytes_deleted = 0;
    uint64_t write_errors = 0;  // Writes or file changes that failed (retried).
    std::string last_error;
  };

  // Opens the first file, and queues the sidecars that finished files of
  // this host lack (an agent killed before it wrote them, files it
  // recovered). Errors name the directory and why.
  static absl::StatusOr<std::unique_ptr<RotatingTraceFile>> Open(Options options);
  ~RotatingTraceFile() override;

  absl::Status Write(absl::string_view packets) override;
  // Ends the last file: fsynced and renamed into place.
  absl::Status Finish() override;
  const std::string& display_name() const override { return display_name_; }
  uint64_t bytes_written() const override;

  bool FileDue() const override;
  absl::Status NextFile() override;

  Stats stats() const;
  SidecarWriter::Stats sidecar_stats() const { return sidecars_.stats(); }
  // Blocks until the sidecars of the files finished so far are written.
  void WaitForSidecars() { sidecars_.WaitIdle(); }

 private:
  explicit RotatingTraceFile(Options options) : options_(std::move(options)) {}
  absl::Status OpenFile();
  absl::Status FinishFile();
  // Retention before a finished file of `joining_bytes` joins the others:
  // room for it within max_files and max_total_bytes.
  void Prune(uint64_t joining_bytes);
  void CountError(const absl::Status& status);

  const Options options_;
  std::shared_ptr<const OutputDir> dir_;
  uint64_t next_seq_ = 1;
  std::unique_ptr<OutputFile> file_;
  std::string partial_name_;  // Of file_, in dir_.
  std::string display_name_;
  absl::Time opened_at_;

  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Last: its destructor writes what is queued while the rest is alive.
  SidecarWriter sidecars_;
};

// At the agent's start: the ".partial" streaming files of this host that an
// agent killed before it could finish them left in `dir`, cut back to their
// last whole packet (a kill may end a write midway) and renamed to their
// final names, so they are kept and counted like any other. Only regular
// files of ours with one link are touched; never through a symlink.
struct RecoveredFiles {
  uint64_t files = 0;
  uint64_t bytes_cut = 0;  // Of packets a kill cut short.
};
RecoveredFiles RecoverPartialStreamFiles(const std::string& dir, const FileHost& host);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_ROTATING_TRACE_FILE_H_
