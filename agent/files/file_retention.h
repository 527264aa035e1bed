#ifndef RINGSIDE_AGENT_FILES_FILE_RETENTION_H_
#define RINGSIDE_AGENT_FILES_FILE_RETENTION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/files/output_dir.h"

namespace ringside::agent {

// This machine's name for the agent's file names ("localhost" if it has
// none).
std::string LocalHostname();

// The agent names its files (snapshots, streaming files)
// "<host>-<UTC yyyymmddThhmmssZ>-<rest>.pftrace", so that they sort by time
// and a shared directory tells hosts apart ('/' in the host becomes '_').
// This returns "<host>-<time>".
std::string AgentFileStem(absl::string_view hostname, absl::Time when);
// <rest> of such a name of this host, or nullopt for any other name.
std::optional<absl::string_view> AgentFileRest(absl::string_view name, absl::string_view hostname);

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
// a rank, oldest meaning first by name (the agent's names start with the
// host, then the UTC time). Only regular files are counted or deleted,
// found and deleted relative to `dir`'s descriptor, never through a
// symlink; `keep` (a name in `dir`, the file just written) is never
// deleted, even alone over `max_bytes`. With `joining`, room is also made
// for a file of that size about to join them (renamed into place after),
// so that the directory never holds more than the limits.
struct FileJoining {
  uint64_t bytes = 0;
};
using FileRank = std::function<std::optional<int>(absl::string_view name)>;
PruneResult PruneOldestFiles(const OutputDir& dir, const FileRank& rank, uint32_t max_files,
                             uint64_t max_bytes, const std::string& keep,
                             std::optional<FileJoining> joining = std::nullopt);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_FILES_FILE_RETENTION_H_
