#include "agent/snapshots/snapshot_retention.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/output/rotating_trace_file.h"

namespace ringside::agent {

bool IsSnapshotFileName(absl::string_view name, const FileHost& host) {
  return AgentFileRest(name, host).has_value() && !IsStreamFileName(name, host);
}

std::string RequestedSnapshotFileReason(absl::string_view reason) {
  if (reason == kRequestedSnapshotReason) return kRequestedSnapshotReason;
  return absl::StrCat(kRequestedSnapshotReason, "-", reason);
}

bool IsRequestedSnapshotName(absl::string_view name, const FileHost& host) {
  if (!IsSnapshotFileName(name, host)) return false;
  absl::string_view rest = *AgentFileRest(name, host);
  return absl::ConsumePrefix(&rest, kRequestedSnapshotReason) && (rest.empty() || rest[0] == '-');
}

PruneResult PruneSnapshots(const OutputDir& dir, const FileHost& host, uint32_t max_files,
                           uint64_t max_bytes, const std::string& keep) {
  return PruneOldestFiles(
      dir, host,
      [&host](absl::string_view name) -> std::optional<int> {
        if (!IsSnapshotFileName(name, host)) return std::nullopt;
        return IsRequestedSnapshotName(name, host) ? 0 : 1;
      },
      max_files, max_bytes, keep);
}

}  // namespace ringside::agent
