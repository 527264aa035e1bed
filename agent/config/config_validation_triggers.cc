// The checks of what fires a trigger by itself: its incident filter, its
// pressure (PSI) threshold, its event, or its stall, one kind a trigger. CheckTriggers
// (config_validation.cc) runs them after the trigger's name and limits.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_limits.h"
#include "agent/config/defaults.h"
#include "agent/config/internal/config_validator.h"

namespace ringside::agent::internal {
namespace {

using Trigger = config::TraceConfig::TriggerConfig::Trigger;

const std::vector<int>& SignalsTheIncidentSourceSees() {
  // bpf/incidents.bpf.c: a fault's signals with their default action, and
  // SIGKILL.
  static const std::vector<int>* signals = new std::vector<int>{4, 6, 7, 8, 9, 11};
  return *signals;
}

// A task name to match: the kernel's comm is at most kMaxCommBytes.
void CheckComm(const std::string& comm, const FieldPath& at, Validator* v) {
  if (comm.empty() || comm.size() > kMaxCommBytes) {
    v->Fail(at, absl::StrCat("is '", absl::CHexEscape(comm), "': a task name is 1 to ",
                             kMaxCommBytes, " bytes (the kernel's comm), so it would never match"));
  }
}

// A pattern of Kubernetes names: what IsKubernetesName allows, with the
// shell's wildcards (fnmatch: * ? [...]).
void CheckPodPattern(const std::string& pattern, const FieldPath& at, Validator* v) {
  const bool chars_ok = std::all_of(pattern.begin(), pattern.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '*' ||
           c == '?' || c == '[' || c == ']' || c == '!';
  });
  if (pattern.empty() || pattern.size() > kMaxKubernetesNameBytes || !chars_ok) {
    v->Fail(at, absl::StrCat("is '", absl::CHexEscape(pattern),
                             "': a pattern of Kubernetes names is 1 to ", kMaxKubernetesNameBytes,
                             " bytes of lowercase letters, digits, '-' and '.', with the wildcards "
                             "* ? [...] (\"web-*\"), so it would never match"));
  }
}

template <typename Filter>
void CheckPodPatterns(const Filter& f, const FieldPath& at, Validator* v) {
  for (int k = 0; k < f.pod_namespaces_size(); k++) {
    CheckPodPattern(f.pod_namespaces(k), Child(at, "pod_namespaces", k), v);
  }
  for (int k = 0; k < f.pods_size(); k++) CheckPodPattern(f.pods(k), Child(at, "pods", k), v);
}

void ValidateIncident(const Trigger::Incident& incident, const FieldPath& at, Validator* v) {
  using Incident = Trigger::Incident;
  auto field = [&](const std::string& name, int index) { return Child(at, name, index); };
  if (incident.kinds_size() == 0) {
    v->Fail(field("kinds", -1), "is empty: OOM_KILL, FATAL_SIGNAL or CORE_DUMP, at least one");
  }
  for (int k = 0; k < incident.kinds_size(); k++) {
    if (incident.kinds(k) == Incident::KIND_UNSPECIFIED) {
      v->Fail(field("kinds", k), "is KIND_UNSPECIFIED: OOM_KILL, FATAL_SIGNAL or CORE_DUMP");
    }
  }
  for (int k = 0; k < incident.signals_size(); k++) {
    const std::vector<int>& seen = SignalsTheIncidentSourceSees();
    if (std::find(seen.begin(), seen.end(), incident.signals(k)) == seen.end()) {
      v->Fail(field("signals", k),
              absl::StrCat("is ", incident.signals(k), ": linux.bpf reports the fatal signals ",
                           absl::StrJoin(seen, ", "),
                           " (SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGKILL, SIGSEGV); for others "
                           "that dump core, use the kind CORE_DUMP"));
    }
  }
  for (int k = 0; k < incident.cgroups_size(); k++) {
    CheckCgroupPath(incident.cgroups(k), field("cgroups", k), v);
  }
  for (int k = 0; k < incident.comms_size(); k++)
    CheckComm(incident.comms(k), field("comms", k), v);
  CheckPodPatterns(incident, at, v);
}

void ValidateTaskStall(const Trigger::TaskStall& s, const FieldPath& at, Validator* v) {
  if (s.threshold_ms() < 1 || s.threshold_ms() > kMaxStallThresholdMs) {
    v->Fail(Child(at, "threshold_ms"),
            absl::StrCat("is ", s.threshold_ms(), ": the stall that fires it, 1 to ",
                         kMaxStallThresholdMs, " ms"));
  }
  for (int k = 0; k < s.comms_size(); k++) CheckComm(s.comms(k), Child(at, "comms", k), v);
  for (int k = 0; k < s.cgroups_size(); k++)
    CheckCgroupPath(s.cgroups(k), Child(at, "cgroups", k), v);
  CheckPodPatterns(s, at, v);
}

void ValidatePressure(const Trigger::Pressure& p, const FieldPath& at, Validator* v) {
  if (p.resource() == Trigger::Pressure::RESOURCE_UNSPECIFIED) {
    v->Fail(Child(at, "resource"), "is unset: CPU, MEMORY or IO");
  }
  const uint32_t window = p.has_window_ms() ? p.window_ms() : kDefaultPressureWindowMs;
  if (window < kMinPressureWindowMs || window > kMaxPressureWindowMs) {
    v->Fail(Child(at, "window_ms"),
            absl::StrCat("is ", window, ": the kernel's windows are ", kMinPressureWindowMs, " to ",
                         kMaxPressureWindowMs, " ms"));
  }
  if (p.stall_ms() == 0 || p.stall_ms() > window) {
    v->Fail(Child(at, "stall_ms"),
            absl::StrCat("is ", p.stall_ms(), ": the stall time in a window that fires it, 1 to ",
                         "window_ms (", window, ")"));
  }
  if (p.cgroups_size() > static_cast<int>(kMaxPressureCgroups)) {
    v->Fail(Child(at, "cgroups"), absl::StrCat("has ", p.cgroups_size(), " cgroups: at most ",
                                               kMaxPressureCgroups, " a trigger"));
  }
  for (int k = 0; k < p.cgroups_size(); k++) {
    CheckCgroupPath(p.cgroups(k), Child(at, "cgroups", k), v);
  }
}

// A tracepoint's name part: what tracefs's events/ directories are named.
bool IsEventNamePart(absl::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

void ValidateEvent(const Trigger::Event& e, const FieldPath& at, Validator* v) {
  const std::string& name = e.event();
  const size_t slash = name.find('/');
  if (slash == std::string::npos || !IsEventNamePart(absl::string_view(name).substr(0, slash)) ||
      !IsEventNamePart(absl::string_view(name).substr(slash + 1))) {
    v->Fail(Child(at, "event"),
            absl::StrCat("is '", absl::CHexEscape(name),
                         "': one tracepoint, \"group/name\" as tracefs's events/ names it "
                         "(\"block/block_rq_complete\"; no glob)"));
  }
  const std::string& filter = e.filter();
  if (filter.size() > kMaxEventFilterBytes ||
      filter.find_first_of(std::string("\n\0", 2)) != std::string::npos) {
    v->Fail(Child(at, "filter"),
            absl::StrCat("is ", filter.size(), " bytes",
                         filter.size() > kMaxEventFilterBytes ? "" : " with a newline or NUL",
                         ": an ftrace filter of one line, at most ", kMaxEventFilterBytes,
                         " bytes (\"nr_sector > 1024\")"));
  }
}

}  // namespace

void CheckTriggerKind(const Trigger& t, const FieldPath& at, Validator* v) {
  // One kind a trigger: the second one set is the one refused.
  std::vector<const char*> kinds;
  if (t.has_incident()) kinds.push_back("incident");
  if (t.has_pressure()) kinds.push_back("pressure");
  if (t.has_event()) kinds.push_back("event");
  if (t.has_blocked()) kinds.push_back("blocked");
  if (t.has_runqueue_delay()) kinds.push_back("runqueue_delay");
  if (kinds.size() > 1) {
    v->Fail(Child(at, kinds[1]),
            absl::StrCat("is set beside ", kinds[0],
                         ": a trigger fires on one kind of thing; make it a trigger of its own"));
  }
  if (t.has_incident()) ValidateIncident(t.incident(), Child(at, "incident"), v);
  if (t.has_pressure()) ValidatePressure(t.pressure(), Child(at, "pressure"), v);
  if (t.has_event()) ValidateEvent(t.event(), Child(at, "event"), v);
  if (t.has_blocked()) ValidateTaskStall(t.blocked(), Child(at, "blocked"), v);
  if (t.has_runqueue_delay()) {
    ValidateTaskStall(t.runqueue_delay(), Child(at, "runqueue_delay"), v);
  }
}

}  // namespace ringside::agent::internal
