#ifndef RINGSIDE_AGENT_OUTPUT_FILE_RETENTION_H_
#define RINGSIDE_AGENT_OUTPUT_FILE_RETENTION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/output/output_dir.h"

namespace ringside::agent {

// This machine's host name ("localhost" if it has none).
std::string LocalHostname();

// The agent names its files (snapshots, streaming files)
// "<host>-<UTC yyyymmddThhmmssZ>-<rest>.pftrace", so that they sort by time
// and a shared directory tells hosts apart ('/' in the host becomes '_', and
// a leading '.' too: never a hidden file). This returns "<host>-<time>".
std::string AgentFileStem(absl::string_view hostname, absl::Time when);

// The <host> of the agent's file names: whose files they are.
//
//   name():   of the files written now;
//   earlier:  another name of the same machine's earlier files, or none.
//
// Retention, the recovery of ".partial" files and the sidecars written at a
// start take the files of either name as this machine's.
class FileHost {
 public:
  FileHost() = default;  // Named "".
  // A machine known by one name. Implicit: one name is the common case (and
  // every test's "h").
  FileHost(const char* name) : FileHost(absl::string_view(name)) {}         // NOLINT
  FileHost(const std::string& name) : FileHost(absl::string_view(name)) {}  // NOLINT
  FileHost(absl::string_view name, absl::string_view earlier = {});         // NOLINT

  // The agent's: named after `machine_name` (the config's, "" when unset)
  // when there is one, else after the host name. A DaemonSet passes its
  // node's name: a pod's host name is the pod's, new with every rollout, so
  // files named after it would be a stranger's to the next pod (kept
  // forever, never finished). With machine_name, the files named after the
  // host name are this machine's earlier ones (written before machine_name
  // was set).
  static FileHost Local(absl::string_view machine_name);

  const std::string& name() const { return name_; }
  // "<time>-<rest>" of the name of a file of this machine's (either name);
  // nullopt for any other name.
  std::optional<absl::string_view> TimeAndRest(absl::string_view file) const;

 private:
  std::string name_;
  std::string earlier_;  // "" when none.
};

// <rest> of such a name of this machine's, or nullopt for any other name.
std::optional<absl::string_view> AgentFileRest(absl::string_view name, const FileHost& host);

struct PruneResult {
  uint64_t files_deleted = 0;
  uint64_t bytes_deleted = 0;
  std::vector<std::string> errors;  // "path: why", for the log.
};

// Retention over the agent's own files in the directory `dir`: keeps at
// most `max_files` (0: any number) and `max_bytes` of them (0: any size).
// `rank` says which names are the agent's files, and how much each is worth
// keeping: nullopt for any other name (never counted nor deleted), and of
// the agent's files those of the lowest rank go first, oldest first within
// a rank, oldest meaning first by the UTC time in the name (then by the
// rest: `host`'s names, whichever of its names a file has; a name that is
// not `host`'s goes by its whole name). Only regular files are counted or deleted,
// found and deleted relative to `dir`'s descriptor, never through a
// symlink; `keep` (a name in `dir`, the file just written) is never
// deleted, even alone over `max_bytes`. With `joining`, room is also made
// for a file of that size about to join them (renamed into place after),
// so that the directory never holds more than the limits.
struct FileJoining {
  uint64_t bytes = 0;
};
using FileRank = std::function<std::optional<int>(absl::string_view name)>;
PruneResult PruneOldestFiles(const OutputDir& dir, const FileHost& host, const FileRank& rank,
                             uint32_t max_files, uint64_t max_bytes, const std::string& keep,
                             std::optional<FileJoining> joining = std::nullopt);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_FILE_RETENTION_H_
