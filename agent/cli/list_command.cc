#include "agent/cli/list_command.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/sources/event_catalog.h"

namespace ringside::agent {
namespace {

bool Matches(const std::string& pattern, const std::string& name) {
  return pattern.empty() || fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// What is not an event but a config turns on: the kinds of trigger that
// fire by themselves, and linux.sys_stats's counters.
struct OtherListing {
  const char* name;
  const char* where;
  const char* what;
};
constexpr OtherListing kTriggerKinds[] = {
    {"trigger:incident", "linux.bpf, or linux.ftrace",
     "OOM kills, fatal signals, core dumps (incident { kinds ... })"},
    {"trigger:pressure", "the kernel's PSI",
     "CPU, memory or IO stalls over a threshold in a window (pressure { ... })"},
    {"trigger:event", "ftrace",
     "a tracepoint's event that passes an ftrace filter (event { event filter })"},
    {"trigger:blocked", "linux.bpf (sched)",
     "a task off the CPU in D for threshold_ms or more (blocked { threshold_ms })"},
    {"trigger:runqueue_delay", "linux.bpf (sched)",
     "a runnable task kept from a CPU for threshold_ms or more (runqueue_delay { threshold_ms })"},
};
constexpr OtherListing kCounters[] = {
    {"sys_stats:meminfo", "/proc/meminfo", "MemAvailable, Cached, Dirty, ... (KiB)"},
    {"sys_stats:vmstat", "/proc/vmstat", "faults, reclaim scans and steals, refaults, OOM kills"},
    {"sys_stats:stat", "/proc/stat", "each CPU's time in each mode, forks"},
    {"sys_stats:psi", "/proc/pressure", "stall time on CPU, memory and IO, some and full"},
    {"process_stats:memory", "/proc/PID/status",
     "each process's RSS (anon, file, shmem), swap, OOM score adjustment"},
};

// The kinds of trigger and the counters matching `pattern`, each with
// whether this machine has what it needs, after `above` lines; returns how
// many were shown.
int ListTriggersAndCounters(const std::string& pattern, int above) {
  const bool psi = access("/proc/pressure/memory", R_OK) == 0;
  const char* psi_here = psi ? "" : "; not on this kernel: no /proc/pressure (psi=1)";
  int shown = 0;
  for (const auto& [heading, table] :
       {std::pair{"Snapshot triggers that fire by themselves (trigger_config, "
                  "docs/flight-recorder.md):",
                  std::vector<OtherListing>(std::begin(kTriggerKinds), std::end(kTriggerKinds))},
        std::pair{"Counters (a config's linux.sys_stats and linux.process_stats, docs/config.md):",
                  std::vector<OtherListing>(std::begin(kCounters), std::end(kCounters))}}) {
    int here = 0;
    for (const OtherListing& l : table) {
      if (!Matches(pattern, l.name)) continue;
      if (here++ == 0) std::printf("%s%s\n", above + shown > 0 ? "\n" : "", heading);
      const bool needs_psi = std::string(l.where).find("PSI") != std::string::npos ||
                             std::string(l.where) == "/proc/pressure";
      std::printf("  %-18s [%s%s] %s\n", l.name, l.where, needs_psi ? psi_here : "", l.what);
    }
    shown += here;
  }
  return shown;
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
          "ftrace events, which 'ringside record -e group:name' adds; and, apart, the\n"
          "kinds of snapshot trigger that fire by themselves and linux.sys_stats's\n"
          "counters. PATTERN is a glob over group:name. Listing ftrace events needs\n"
          "tracefs (root).",
      .flags = {{'v', "verbose", "", "also print each ftrace event's fields", false}},
      .examples =
          "  ringside list\n"
          "  ringside list 'sched:*'\n"
          "  ringside list 'trigger:*'\n"
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
  shown += ListTriggersAndCounters(pattern, shown);
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
