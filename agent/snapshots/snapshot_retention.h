#ifndef RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_RETENTION_H_
#define RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_RETENTION_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/output/file_retention.h"

namespace ringside::agent {

// True for the name of a snapshot file the agent writes
// (SnapshotFileName): "<hostname>-<yyyymmddThhmmssZ>-<reason>.pftrace".
// Retention deletes only these: output_dir may hold other files, the
// streaming drain's among them (IsStreamFileName), which never count.
bool IsSnapshotFileName(absl::string_view name, const FileHost& host);

// A snapshot asked for by hand (`ringside snapshot`) is named for the
// reason "request" or "request-<its reason>": retention tells it from one
// the agent's triggers fired by that name alone, across restarts.
inline constexpr char kRequestedSnapshotReason[] = "request";
// A snapshot SIGUSR1 asked for: its file's reason and its trigger's name.
inline constexpr char kSignalSnapshotReason[] = "signal";
// The reason a requested snapshot's file is named for.
std::string RequestedSnapshotFileReason(absl::string_view reason);
// True for the name of a snapshot asked for by hand.
bool IsRequestedSnapshotName(absl::string_view name, const FileHost& host);

// Keeps at most `max_files` snapshots (0: any number) and `max_bytes` of
// them (0: any size) in `dir`. Snapshots asked for by hand go first, then
// those the triggers fired (an OOM kill's, a crash's: the evidence the
// agent is there for, which a flood of requests must not push out); oldest
// first within each (by the time in their names, then by name). Only
// regular files whose names are snapshot names of `host` (either of its
// names) are counted or
// deleted; `keep` (the name of the file just written) is never deleted,
// even if it alone is over `max_bytes`.
PruneResult PruneSnapshots(const OutputDir& dir, const FileHost& host, uint32_t max_files,
                           uint64_t max_bytes, const std::string& keep);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_SNAPSHOT_RETENTION_H_
