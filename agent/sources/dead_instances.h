#ifndef RINGSIDE_AGENT_SOURCES_DEAD_INSTANCES_H_
#define RINGSIDE_AGENT_SOURCES_DEAD_INSTANCES_H_

#include <string>
#include <vector>

namespace ringside::agent {

// The ftrace instances of ringside processes that died without removing
// them (kill -9): they keep tracing into their per-CPU buffers until
// someone does. An ftrace source removes them when it makes its own
// instance; the agent, which may run none, calls this at start.
//
// Removes every such instance (ftrace::Instance::RemoveStaleInstances) and
// returns their names; none when there were none, or without tracefs (the
// ftrace source, if any, says why). tracefs mounted just for this for
// everyone (no mount namespace of our own) is unmounted again.
std::vector<std::string> RemoveDeadRecordersInstances();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_DEAD_INSTANCES_H_
