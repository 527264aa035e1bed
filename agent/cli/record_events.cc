#include "agent/cli/record_events.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/sources/event_catalog.h"

namespace ringside::agent {

namespace {

// An -e event, parsed: the event's group and name ("*": every event of
// the group), and its filter ("" for none).
struct EventArg {
  std::string group;
  std::string name;
  std::string filter;

  std::string path() const { return absl::StrCat(group, "/", name); }  // Below events/.
};

// "group:name", "group/name", "group:*", each with an optional "/filter/".
absl::StatusOr<EventArg> ParseEventArg(const std::string& spec) {
  std::string event = spec, filter;
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    // group:name[/filter/]
    const size_t slash = spec.find('/', colon);
    event = spec.substr(0, colon) + "/" + spec.substr(colon + 1, slash - colon - 1);
    if (slash != std::string::npos) {
      if (spec.size() < slash + 2 || spec.back() != '/') {
        return absl::InvalidArgumentError(
            absl::StrCat("-e ", spec, ": a filter is written between slashes: group:name/filter/"));
      }
      filter = spec.substr(slash + 1, spec.size() - slash - 2);
    }
  }
  const std::vector<std::string> parts = absl::StrSplit(event, '/');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty() ||
      parts[0].find_first_of("*? ") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("-e ", spec,
                     ": an event is group:name (e.g. sched:sched_switch, irq:*), optionally "
                     "with a filter: group:name/filter/ ('ringside list' shows the events)"));
  }
  if (!filter.empty() && parts[1] == "*") {
    return absl::InvalidArgumentError(
        absl::StrCat("-e ", spec, ": a filter needs one event, not a group:* glob"));
  }
  return EventArg{parts[0], parts[1], filter};
}

// The config's linux.ftrace source, added (into buffer 0) when it has none.
config::DataSourceConfig* FtraceSourceOf(config::TraceConfig* cfg) {
  for (auto& ds : *cfg->mutable_data_sources()) {
    if (ds.config().name() == "linux.ftrace") return ds.mutable_config();
  }
  config::DataSourceConfig* ftrace = cfg->add_data_sources()->mutable_config();
  ftrace->set_name("linux.ftrace");
  ftrace->set_target_buffer(0);
  return ftrace;
}

// Whether a linux.bpf source of the config records every hit of `event`.
bool BpfRecords(const config::TraceConfig& cfg, const std::string& event) {
  return std::any_of(cfg.data_sources().begin(), cfg.data_sources().end(), [&](const auto& ds) {
    if (ds.config().name() != "linux.bpf") return false;
    const std::vector<std::string> recorded = BpfRecordedTracepoints(ds.config().bpf_config());
    return std::find(recorded.begin(), recorded.end(), event) != recorded.end();
  });
}

}  // namespace

absl::Status AddEvent(const std::string& spec, config::TraceConfig* cfg, std::string* event_out) {
  absl::StatusOr<EventArg> arg = ParseEventArg(spec);
  if (!arg.ok()) return arg.status();
  const std::string event = arg->path();
  const std::string& filter = arg->filter;
  *event_out = event;
  config::FtraceConfig* fc = FtraceSourceOf(cfg)->mutable_ftrace_config();
  // An event a linux.bpf source records every hit of goes into
  // bpf_fallback_events: ftrace takes it only when BPF is not running. As
  // an ftrace_events event it would be left out while BPF runs (see
  // source_factory.cc), and a filter would narrow nothing, so -e refuses a
  // filter on it.
  const bool bpf_records_it = BpfRecords(*cfg, event);
  if (bpf_records_it && !filter.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-e ", spec, ": BPF records every ", arg->group, ":", arg->name,
        " (see 'ringside list bpf:*'), so a filter would narrow nothing; leave the filter "
        "out, or record with a config (-c) without linux.bpf, where ftrace applies it"));
  }
  if (bpf_records_it) {
    if (std::find(fc->bpf_fallback_events().begin(), fc->bpf_fallback_events().end(), event) ==
        fc->bpf_fallback_events().end()) {
      fc->add_bpf_fallback_events(event);
    }
    return absl::OkStatus();
  }
  if (std::find(fc->ftrace_events().begin(), fc->ftrace_events().end(), event) ==
      fc->ftrace_events().end()) {
    fc->add_ftrace_events(event);
  }
  if (!filter.empty()) {
    auto* f = fc->add_event_filters();
    f->set_event(event);
    f->set_filter(filter);
  }
  return absl::OkStatus();
}

// An -e event this kernel does not have is refused before anything is
// recorded, as perf does: a trace silently without it is the worse answer.
// Without tracefs the events cannot be checked, and the ftrace part is then
// disabled and named when the recording starts.
absl::Status CheckEventsExist(const std::vector<std::string>& specs,
                              const std::vector<std::string>& events) {
  if (events.empty()) return absl::OkStatus();
  absl::StatusOr<FtraceEventCatalog> catalog = FtraceEventCatalog::Open();
  if (!catalog.ok()) return absl::OkStatus();
  absl::Status status = absl::OkStatus();
  for (size_t i = 0; i < events.size() && status.ok(); i++) {
    const size_t slash = events[i].find('/');
    const std::string group = events[i].substr(0, slash), name = events[i].substr(slash + 1);
    if (catalog->Exists(name == "*" ? group : events[i])) continue;
    if (group == "bpf") {
      status = absl::InvalidArgumentError(absl::StrCat(
          "-e ", specs[i],
          ": BPF groups are not -e events; a config turns them on in the linux.bpf data "
          "source's bpf_config (docs/config.md), and the embedded default has them all"));
    } else {
      status = absl::InvalidArgumentError(absl::StrCat(
          "-e ", specs[i], ": this kernel has no ", name == "*" ? "event group " : "event ",
          name == "*" ? group : absl::StrCat(group, ":", name),
          " ('ringside list' shows the events there are); nothing recorded"));
    }
  }
  // The system as found: the recording mounts it again for itself.
  catalog->UnmountIfMounted();
  return status;
}

}  // namespace ringside::agent
