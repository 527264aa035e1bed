#ifndef RINGSIDE_AGENT_DAEMON_DEAD_AGENT_CLEANUP_H_
#define RINGSIDE_AGENT_DAEMON_DEAD_AGENT_CLEANUP_H_

#include "agent/lifecycle/agent_log.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// What an agent killed with kill -9 leaves behind, cleaned up at every
// start whatever the new config records, each step logged when it finds
// something:
//  - its snapshot temporaries in output_dir (the next snapshot would not
//    reuse them), removed;
//  - its ".partial" streaming files, cut back to their last whole packet
//    and kept under their final names (a streaming agent does this when it
//    opens its stream; shippers skip ".partial" files);
//  - the ftrace instances of ringside processes that died, which keep
//    tracing with their per-CPU buffers until someone removes them.
// ringside pins no BPF object: its programs go with the process.
void CleanUpAfterDeadAgents(const config::TraceConfig& config, AgentLog& log);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_DEAD_AGENT_CLEANUP_H_
