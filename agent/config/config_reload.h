#ifndef RINGSIDE_AGENT_CONFIG_CONFIG_RELOAD_H_
#define RINGSIDE_AGENT_CONFIG_CONFIG_RELOAD_H_

#include <string>
#include <vector>

#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// What a config reload (SIGHUP) changes in a running agent. Only settings
// read afresh for each use can change live; everything the recording was
// built from (buffers, data sources, the durable store, the control socket)
// needs a restart and keeps its running value.
struct ReloadPlan {
  // The running config with the live changes applied.
  config::TraceConfig next;
  // Top-level fields changed live, and fields that changed but keep their
  // old value until a restart; TraceConfig field names, in field order.
  std::vector<std::string> applied;
  std::vector<std::string> kept;
};

// Both configs effective (defaults applied).
ReloadPlan PlanReload(const config::TraceConfig& running, const config::TraceConfig& loaded);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_CONFIG_RELOAD_H_
