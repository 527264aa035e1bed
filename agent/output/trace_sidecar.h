#ifndef RINGSIDE_AGENT_OUTPUT_TRACE_SIDECAR_H_
#define RINGSIDE_AGENT_OUTPUT_TRACE_SIDECAR_H_

#include <sys/types.h>

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
#include "agent/output/output_dir.h"
#include "agent/tracefile/trace_inspector.h"

namespace ringside::agent {

// Next to each file the agent finishes (a snapshot, a rotated streaming
// file), a small JSON file says what it holds, so that a shipper or an
// indexer can pick files up without parsing traces:
//
//   <name>.pftrace        the trace, whole (renamed into place when done)
//   <name>.pftrace.json   its sidecar: written after the trace is whole, as
//                         a temporary file renamed into place, so it appears
//                         whole and only once the trace is finished
//
// The rule for whoever takes files away: a trace without its sidecar is
// not finished. The sidecar's fields are those of `ringside inspect --json`
// that say what a file is (FileFactsToJson: file, size_bytes, sha256,
// machine, time_range, held, snapshot_windows, compression, losses,
// snapshot_triggers, pods, error) and
// "ringside_sidecar": its format's version. Retention deletes a trace's
// sidecar before the trace (file_retention.h).

inline constexpr char kSidecarSuffix[] = ".json";
inline constexpr int kSidecarVersion = 1;

// "<trace_name>.json".
std::string SidecarName(absl::string_view trace_name);
// ".<trace_name>.json.tmp": the sidecar while it is written. Hidden and not
// ending in ".json", so no shipper's pattern takes it.
std::string SidecarTempName(absl::string_view trace_name);
// Whether `name` is a sidecar, or a sidecar being written.
bool IsSidecarOrItsTemporary(absl::string_view name);

// Writes the sidecar of the finished trace `name` in `dir` (read relative to
// the directory, never through a symlink; only a regular file of ours),
// 0600, or 0640 owned by `group`. Never replaces a file at the sidecar's
// name. kNotFound when the trace is gone (retention, or a shipper took
// it): no sidecar is left for it then. Errors name the file and why.
// `publish_mu`, if given, is held while the sidecar is put in place and the
// trace found still there; retention holds it too, so that a trace deleted
// meanwhile never leaves a sidecar describing nothing. Returns the summary
// the sidecar was made from.
absl::StatusOr<TraceSummary> WriteSidecar(const OutputDir& dir, const std::string& name,
                                          std::optional<gid_t> group,
                                          absl::Mutex* publish_mu = nullptr);

// The names in `dir` for which `is_trace` is true, regular files without a
// sidecar: those an agent killed between finishing a file and writing its
// sidecar left, written at the next start.
std::vector<std::string> TracesWithoutSidecar(
    const OutputDir& dir, const std::function<bool(absl::string_view)>& is_trace);

// Writes sidecars on a thread of its own, in the order asked, so that
// reading a finished file back (to hash and summarize it) never holds up
// the thread that finished it (the streaming drain). Thread-safe.
class SidecarWriter {
 public:
  struct Stats {
    uint64_t written = 0;
    uint64_t failed = 0;
    uint64_t gone = 0;       // Traces deleted or taken before their sidecar.
    std::string last_error;  // Empty while none has failed.
  };
  SidecarWriter();
  // Writes what is queued, then stops.
  ~SidecarWriter();
  SidecarWriter(const SidecarWriter&) = delete;
  SidecarWriter& operator=(const SidecarWriter&) = delete;

  void Queue(std::shared_ptr<const OutputDir> dir, std::string name, std::optional<gid_t> group);
  // Blocks until the queue is empty and nothing is being written (what
  // was queued before the call, and anything queued meanwhile).
  void WaitIdle();
  Stats stats() const;
  // Held by the sidecars' publishing (WriteSidecar's publish_mu): retention
  // of the same directory holds it while it deletes.
  absl::Mutex& publish_mutex() { return publish_mu_; }

 private:
  struct Job {
    std::shared_ptr<const OutputDir> dir;
    std::string name;
    std::optional<gid_t> group;
  };
  void Loop();

  absl::Mutex publish_mu_;
  mutable absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_TRACE_SIDECAR_H_
