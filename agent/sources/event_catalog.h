#ifndef RINGSIDE_AGENT_SOURCES_EVENT_CATALOG_H_
#define RINGSIDE_AGENT_SOURCES_EVENT_CATALOG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ftrace/tracefs.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// What can be recorded, as the command line asks it (`ringside list`,
// `ringside record -e`): the BPF program groups and what each emits, the
// tracepoints a linux.bpf source records every hit of, and this kernel's
// ftrace events. The kernel formats are bpf/'s and ftrace/'s; the sources
// answer for them.

// One linux.bpf program group.
struct BpfGroupListing {
  const char* name;    // As listed and matched: "bpf:sched".
  const char* config;  // What turns it on: "bpf_config { sched: true }".
  // Its events, each with its note: "sched_switch (prev_state as the
  // tracepoint reports it), sched_waking, ..." (bpf::kEventTypes).
  std::string emits;
};
// The three groups: sched, process, incidents.
std::vector<BpfGroupListing> BpfGroupListings();

// The tracepoints ("group/name", as tracefs names them) whose every hit a
// linux.bpf source of `bpf` records (its sched and process groups): an
// ftrace source leaves them to it.
std::vector<std::string> BpfRecordedTracepoints(const config::BpfConfig& bpf);

// This kernel's ftrace events, read from tracefs. Copyable; holds no fd.
class FtraceEventCatalog {
 public:
  // Finds tracefs, and mounts it if it is mounted nowhere and we may
  // (ftrace::Tracefs::Open, whose errors it returns).
  static absl::StatusOr<FtraceEventCatalog> Open();

  // available_events: one "group:name" a line.
  absl::StatusOr<std::string> AvailableEvents() const;
  // The declarations of the event's fields, as its format file gives them
  // ("pid_t prev_pid"); an error naming the file, or what could not be
  // parsed.
  absl::StatusOr<std::vector<std::string>> FieldDeclarations(const std::string& group,
                                                             const std::string& name) const;
  // Whether events/<event_path> exists: "group/name", or "group" for a
  // group.
  bool Exists(const std::string& event_path) const;
  // Leaves the system as found: unmounts tracefs if Open() mounted it for
  // everyone.
  void UnmountIfMounted();

 private:
  explicit FtraceEventCatalog(ftrace::Tracefs tracefs) : tracefs_(std::move(tracefs)) {}
  ftrace::Tracefs tracefs_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_EVENT_CATALOG_H_
