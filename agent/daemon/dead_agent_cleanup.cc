#include "agent/daemon/dead_agent_cleanup.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/daemon/agent_stream.h"
#include "agent/files/output_file.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {
namespace {

// Instance::Create removes dead recorders' instances on its way, but an
// agent without an ftrace source creates none. tracefs mounted just for
// this for everyone (no mount namespace of our own) is unmounted again.
void RemoveDeadRecordersInstances(AgentLog& log) {
  absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
  if (!tracefs.ok()) return;  // The ftrace source, if any, says why.
  const ftrace::Instance::StaleInstances stale = ftrace::Instance::RemoveStaleInstances(*tracefs);
  if (!stale.removed.empty()) {
    log.Notice(absl::StrCat("removed ", stale.removed.size(),
                            " ftrace instance(s) of ringside processes that died without removing "
                            "them: ",
                            absl::StrJoin(stale.removed, ", ")));
  }
  if (tracefs->mounted_by_us()) (void)tracefs->Unmount();
}

}  // namespace

void CleanUpAfterDeadAgents(const config::TraceConfig& config, AgentLog& log) {
  if (const RemovedTemporaries gone = RemoveDeadTemporaryFiles(config.output_dir());
      gone.files > 0) {
    log.Notice(absl::StrCat("removed ", gone.files, " unfinished snapshot file(s) (",
                            gone.bytes >> 20, " MiB) that a killed agent left in ",
                            config.output_dir()));
  }
  if (!config.write_into_file()) RecoverAgentStreamFiles(config, log);
  RemoveDeadRecordersInstances(log);
}

}  // namespace ringside::agent
