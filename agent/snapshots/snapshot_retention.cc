#include "agent/snapshots/snapshot_retention.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/files/rotating_trace_file.h"

namespace ringside::agent {

bool IsSnapshotFileName(absl::string_view name, absl::string_view hostname) {
  return AgentFileRest(name, hostname).has_value() && !IsStreamFileName(name, hostname);
}

std::string RequestedSnapshotFileReason(absl::string_view reason) {
  if (reason == kRequestedSnapshotReason) return kRequestedSnapshotReason;
  return absl::StrCat(kRequestedSnapshotReason, "-", reason);
}

bool IsRequestedSnapshotName(absl::string_view name, absl::string_view hostname) {
  if (!IsSnapshotFileName(name, hostname)) return false;
  absl::string_view rest = *AgentFileRest(name, hostname);
  return absl::ConsumePrefix(&rest, kRequestedSnapshotReason) && (rest.empty() || rest[0] == '-');
}

PruneResult PruneSnapshots(const OutputDir& dir, absl::string_view hostname, uint32_t max_files,
                           uint64_t max_bytes, const std::string& keep) {
  return PruneOldestFiles(
      dir,
      [hostname](absl::string_view name) -> std::optional<int> {
        if (!IsSnapshotFileName(name, hostname)) return std::nullopt;
        return IsRequestedSnapshotName(name, hostname) ? 0 : 1;
      },
      max_files, max_bytes, keep);
}

}  // namespace ringside::agent
