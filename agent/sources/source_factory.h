#ifndef RINGSIDE_AGENT_SOURCES_SOURCE_FACTORY_H_
#define RINGSIDE_AGENT_SOURCES_SOURCE_FACTORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/descriptors/descriptor_tracker.h"
#include "agent/sources/cpu_budget.h"
#include "agent/sources/data_source.h"
#include "agent/sources/incident.h"
#include "agent/writer/producer_buffer.h"
#include "ftrace/tracefs.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// A data source of a session with the chunk pool it writes through; its
// packets go to buffer `target_buffer`.
struct SourceSlot {
  std::string name;  // The config's data source name ("linux.bpf").
  uint32_t target_buffer = 0;
  std::unique_ptr<ProducerBuffer> producer;
  std::unique_ptr<DataSource> source;
};

struct BuiltSources {
  // max_consumer_cpu_percent, shared by every source's reader thread; null
  // without a limit. Before `slots`: it outlives the sources.
  std::unique_ptr<CpuBudget> cpu_budget;
  std::vector<SourceSlot> slots;
  // Mounted for the ftrace sources when it was not mounted (unmounted at
  // the end by the session: UnmountTracefs()).
  std::optional<ftrace::Tracefs> tracefs;
  // Sources that could not be built, and what each one could not do, for
  // the user; the rest still record.
  std::vector<std::string> warnings;
  // The config's sources that could not be built: name, and why.
  struct Failed {
    std::string name;
    std::string error;
  };
  std::vector<Failed> failed;
  // Incidents (OOM kills, fatal signals) are reported to the listener: by
  // linux.bpf's incident programs, or in their place by a linux.ftrace
  // source's oom/mark_victim and signal/signal_deliver.
  bool incidents_reported = false;

  // tracefs was not mounted and could not be mounted in a mount namespace
  // of our own, so the sources mounted it for the whole system.
  bool mounted_tracefs_for_everyone() const {
    return tracefs.has_value() && tracefs->mounted_by_us();
  }
  // Leaves tracefs as the sources found it (unmounts what they mounted for
  // everyone; needs CAP_SYS_ADMIN). REQUIRES: the sources are gone.
  // Out of line: the call into ftrace/ is the sources' (check-links).
  void UnmountTracefs();
};

// The one place where the config's data sources become DataSources. Reads
// the config as ApplyDefaults() left it (no defaults of its own). linux.bpf
// is built before linux.ftrace: which of its program groups load decides
// which of the ftrace sources' bpf_fallback_events are recorded. A new kind of source is one more
// entry in the table of source_factory.cc. `tracker` (may be null) is told of process events by
// every source, `incidents` (may be null) of the incidents a source reads.
BuiltSources BuildDataSources(const config::TraceConfig& config, DescriptorTracker* tracker,
                              IncidentListener* incidents = nullptr);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_SOURCE_FACTORY_H_
