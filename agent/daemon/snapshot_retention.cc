#include "agent/daemon/snapshot_retention.h"

#include "agent/files/rotating_trace_file.h"

namespace ringside::agent {

bool IsSnapshotFileName(absl::string_view name, absl::string_view hostname) {
  return AgentFileRest(name, hostname).has_value() && !IsStreamFileName(name, hostname);
}

PruneResult PruneSnapshots(const std::string& dir, absl::string_view hostname, uint32_t max_files,
                           uint64_t max_bytes, const std::string& keep) {
  return PruneOldestFiles(
      dir, [hostname](absl::string_view name) { return IsSnapshotFileName(name, hostname); },
      max_files, max_bytes, keep);
}

}  // namespace ringside::agent
