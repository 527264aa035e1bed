#include "agent/sources/dead_instances.h"

#include "absl/status/statusor.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {

std::vector<std::string> RemoveDeadRecordersInstances() {
  absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
  if (!tracefs.ok()) return {};
  ftrace::Instance::StaleInstances stale = ftrace::Instance::RemoveStaleInstances(*tracefs);
  if (tracefs->mounted_by_us()) (void)tracefs->Unmount();
  return std::move(stale.removed);
}

}  // namespace ringside::agent
