#include "agent/cli/list_command.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/sources/event_catalog.h"

namespace ringside::agent {
namespace {

bool Matches(const std::string& pattern, const std::string& name) {
  return pattern.empty() || fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

const CommandSpec& ListCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "list",
      .synopsis = "ringside list [-v] [PATTERN]",
      .summary =
          "Lists the events ringside can record: its BPF programs (the default source of\n"
          "scheduling, process and incident events) with what they emit, apart, as a\n"
          "config's linux.bpf data source turns them on (not -e); and this kernel's\n"
          "ftrace events, which 'ringside record -e group:name' adds. PATTERN is a glob\n"
          "over group:name. Listing ftrace events needs tracefs (root).",
      .flags = {{'v', "verbose", "", "also print each ftrace event's fields", false}},
      .examples =
          "  ringside list\n"
          "  ringside list 'sched:*'\n"
          "  ringside list -v irq:irq_handler_entry\n",
      .max_positional = 1,
      .rest_is_command = false,
  };
  return *spec;
}

int RunListCommand(const ParsedArgs& args) {
  const std::string pattern = args.positional.empty() ? "" : args.positional[0];
  const bool verbose = args.Has("verbose");
  // The BPF groups are named like events but -e does not take them: they
  // are set apart under a heading that says where they are turned on.
  int shown = 0;
  for (const BpfGroupListing& g : BpfGroupListings()) {
    if (!Matches(pattern, g.name)) continue;
    if (shown++ == 0) {
      std::printf(
          "BPF program groups (not -e events: a config's linux.bpf data source turns them on\n"
          "in bpf_config, docs/config.md; 'ringside record' with no -c has them all):\n");
    }
    std::printf("  %-16s [BPF, %s] %s\n", g.name, g.config, g.emits.c_str());
  }
  const int bpf_shown = shown;
  absl::StatusOr<FtraceEventCatalog> catalog = FtraceEventCatalog::Open();
  absl::StatusOr<std::string> available =
      catalog.ok() ? catalog->AvailableEvents() : catalog.status();
  if (!available.ok()) {
    std::fprintf(stderr, "ringside list: cannot list the kernel's ftrace events: %s\n",
                 std::string(available.status().message()).c_str());
    return shown > 0 ? kExitOk : kExitFailure;
  }
  std::vector<std::string> events;
  for (absl::string_view line : absl::StrSplit(*available, '\n', absl::SkipEmpty())) {
    if (Matches(pattern, std::string(line))) events.emplace_back(line);
  }
  std::sort(events.begin(), events.end());
  if (bpf_shown > 0 && !events.empty()) {
    std::printf("\nftrace events ('ringside record -e group:name' adds them):\n");
  }
  for (const std::string& e : events) {
    std::printf("%-40s [ftrace]\n", e.c_str());
    shown++;
    if (!verbose) continue;
    const size_t colon = e.find(':');
    const std::string group = e.substr(0, colon), name = e.substr(colon + 1);
    absl::StatusOr<std::vector<std::string>> fields = catalog->FieldDeclarations(group, name);
    if (!fields.ok()) {
      std::printf("    (format unreadable: %s)\n", std::string(fields.status().message()).c_str());
      continue;
    }
    for (const std::string& f : *fields) std::printf("    %s\n", f.c_str());
  }
  if (shown == 0) {
    std::fprintf(stderr, "ringside list: no event matches '%s'\n", pattern.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace ringside::agent
