#include "agent/daemon/dead_agent_cleanup.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/daemon/agent_stream.h"
#include "agent/output/output_file.h"
#include "agent/sources/dead_instances.h"

namespace ringside::agent {

void CleanUpAfterDeadAgents(const config::TraceConfig& config, AgentLog& log) {
  if (const RemovedTemporaries gone = RemoveDeadTemporaryFiles(config.output_dir());
      gone.files > 0) {
    log.Notice(absl::StrCat("removed ", gone.files, " unfinished snapshot file(s) (",
                            gone.bytes >> 20, " MiB) that a killed agent left in ",
                            config.output_dir()));
  }
  if (!config.write_into_file()) RecoverAgentStreamFiles(config, log);
  // Dead recorders' ftrace instances: an ftrace source removes them on its
  // way, but an agent without one creates none.
  if (const std::vector<std::string> removed = RemoveDeadRecordersInstances(); !removed.empty()) {
    log.Notice(absl::StrCat("removed ", removed.size(),
                            " ftrace instance(s) of ringside processes that died without removing "
                            "them: ",
                            absl::StrJoin(removed, ", ")));
  }
}

}  // namespace ringside::agent
