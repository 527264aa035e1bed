#include "agent/sources/event_catalog.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "bpf/event_source.h"
#include "bpf/event_types.h"
#include "ftrace/event_format.h"

namespace ringside::agent {
namespace {

struct BpfGroup {
  const char* name;
  const char* config;
  bpf::Group group;
};
constexpr BpfGroup kBpfGroups[] = {
    {"bpf:sched", "bpf_config { sched: true }", bpf::Group::kSched},
    {"bpf:process", "bpf_config { process: true }", bpf::Group::kProcess},
    {"bpf:incidents", "bpf_config { incidents: true }", bpf::Group::kIncidents},
};

// "sched_switch (prev_state as the tracepoint reports it), sched_waking, ..."
std::string Emits(bpf::Group group) {
  std::string out;
  for (const bpf::EventType& e : bpf::kEventTypes) {
    if (e.group != group) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", e.name, *e.note ? " (" : "", e.note,
                    *e.note ? ")" : "");
  }
  return out;
}

}  // namespace

std::vector<BpfGroupListing> BpfGroupListings() {
  std::vector<BpfGroupListing> groups;
  for (const BpfGroup& g : kBpfGroups) groups.push_back({g.name, g.config, Emits(g.group)});
  return groups;
}

std::vector<std::string> BpfRecordedTracepoints(const config::BpfConfig& bpf) {
  bpf::EventSource::Options groups;
  groups.sched = bpf.sched();
  groups.process = bpf.process();
  return bpf::EventSource::RecordedTracepoints(groups);
}

absl::StatusOr<FtraceEventCatalog> FtraceEventCatalog::Open() {
  absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
  if (!tracefs.ok()) return tracefs.status();
  return FtraceEventCatalog(*std::move(tracefs));
}

absl::StatusOr<std::string> FtraceEventCatalog::AvailableEvents() const {
  return tracefs_.Read("available_events");
}

absl::StatusOr<std::vector<std::string>> FtraceEventCatalog::FieldDeclarations(
    const std::string& group, const std::string& name) const {
  absl::StatusOr<std::string> text =
      tracefs_.Read(absl::StrCat("events/", group, "/", name, "/format"));
  if (!text.ok()) return text.status();
  absl::StatusOr<ftrace::EventFormat> format = ftrace::ParseEventFormat(group, *text);
  if (!format.ok()) return format.status();
  std::vector<std::string> declarations;
  for (const ftrace::FieldFormat& f : format->fields) declarations.push_back(f.declaration);
  return declarations;
}

bool FtraceEventCatalog::Exists(const std::string& event_path) const {
  return tracefs_.Exists(absl::StrCat("events/", event_path));
}

void FtraceEventCatalog::UnmountIfMounted() {
  if (tracefs_.mounted_by_us()) (void)tracefs_.Unmount();
}

}  // namespace ringside::agent
