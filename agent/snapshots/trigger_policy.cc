#include "agent/snapshots/trigger_policy.h"

#include <fnmatch.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <random>
#include <tuple>
#include <utility>

#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/descriptors/cgroup_fs.h"
#include "agent/descriptors/process_scan.h"

namespace ringside::agent {

namespace {

constexpr absl::Duration kHour = absl::Hours(1);
constexpr absl::Duration kDay = absl::Hours(24);
uint32_t Capped(uint32_t limit) { return std::min(limit, kMaxTriggerFiresPerWindow); }

// The longest window whose limit needs the fire times; zero when none does.
absl::Duration HistoryWindow(const TriggerPolicy::Rule& rule) {
  if (rule.max_per_24_h > 0) return kDay;
  if (rule.max_per_hour > 0) return kHour;
  return absl::ZeroDuration();
}

// Fires within `window` before `now`: those after now - window.
size_t FiresWithin(const std::deque<absl::Time>& fires, absl::Time now, absl::Duration window) {
  const auto first = std::upper_bound(fires.begin(), fires.end(), now - window);
  return static_cast<size_t>(fires.end() - first);
}

}  // namespace

TriggerPolicy::TriggerPolicy(std::vector<Rule> rules, std::function<double()> random)
    : random_(std::move(random)) {
  Install(std::move(rules), {});
}

std::function<double()> TriggerPolicy::UniformRandom() {
  // std::function must be copyable; the copies share one generator.
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

TriggerPolicy::Rule TriggerPolicy::RequestRuleFrom(const config::TraceConfig& config,
                                                   absl::string_view name) {
  Rule rule;
  rule.name = std::string(name);
  rule.cooldown = absl::Milliseconds(config.snapshot_request_cooldown_ms());
  rule.max_per_hour = config.max_snapshot_requests_per_hour();
  return rule;
}

std::vector<TriggerPolicy::Rule> TriggerPolicy::RulesFrom(const config::TraceConfig& config) {
  std::vector<Rule> rules;
  for (const config::TraceConfig::TriggerConfig::Trigger& t : config.trigger_config().triggers()) {
    Rule rule;
    rule.name = t.name();
    rule.cooldown =
        absl::Milliseconds(t.has_cooldown_ms() ? t.cooldown_ms() : kDefaultTriggerCooldownMs);
    rule.max_per_hour = t.max_per_hour();
    rule.max_per_24_h = t.max_per_24_h();
    rule.skip_probability = t.skip_probability();
    rule.stop_delay = absl::Milliseconds(t.stop_delay_ms());
    if (t.has_incident()) {
      using Kind = config::TraceConfig::TriggerConfig::Trigger::Incident;
      Rule::IncidentFilter filter;
      for (int kind : t.incident().kinds()) {
        if (kind == Kind::OOM_KILL) filter.kinds.push_back(Incident::Kind::kOomKill);
        if (kind == Kind::FATAL_SIGNAL) filter.kinds.push_back(Incident::Kind::kFatalSignal);
        if (kind == Kind::CORE_DUMP) filter.kinds.push_back(Incident::Kind::kCoreDump);
      }
      filter.signals.assign(t.incident().signals().begin(), t.incident().signals().end());
      if (filter.signals.empty()) {
        filter.signals.assign(std::begin(kDefaultCrashSignals), std::end(kDefaultCrashSignals));
      }
      filter.comms.assign(t.incident().comms().begin(), t.incident().comms().end());
      filter.cgroups.assign(t.incident().cgroups().begin(), t.incident().cgroups().end());
      filter.pod_namespaces.assign(t.incident().pod_namespaces().begin(),
                                   t.incident().pod_namespaces().end());
      filter.pods.assign(t.incident().pods().begin(), t.incident().pods().end());
      rule.incident = std::move(filter);
    }
    for (const auto& [has, stall, kind] :
         {std::tuple{t.has_blocked(), &t.blocked(), Incident::Kind::kBlocked},
          std::tuple{t.has_runqueue_delay(), &t.runqueue_delay(),
                     Incident::Kind::kRunqueueDelay}}) {
      if (!has) continue;
      Rule::IncidentFilter filter;
      filter.kinds = {kind};
      filter.comms.assign(stall->comms().begin(), stall->comms().end());
      filter.cgroups.assign(stall->cgroups().begin(), stall->cgroups().end());
      filter.pod_namespaces.assign(stall->pod_namespaces().begin(), stall->pod_namespaces().end());
      filter.pods.assign(stall->pods().begin(), stall->pods().end());
      filter.min_stalled_ns = int64_t{stall->threshold_ms()} * 1'000'000;
      rule.incident = std::move(filter);
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

void TriggerPolicy::Install(std::vector<Rule> rules,
                            absl::flat_hash_map<std::string, State> previous) {
  states_.clear();
  for (Rule& rule : rules) {
    if (states_.contains(rule.name)) continue;
    rule.max_per_hour = Capped(rule.max_per_hour);
    rule.max_per_24_h = Capped(rule.max_per_24_h);
    State state;
    if (auto it = previous.find(rule.name); it != previous.end()) state = std::move(it->second);
    std::string name = rule.name;
    state.rule = std::move(rule);
    if (latest_now_ != absl::InfinitePast()) Prune(&state, latest_now_);
    states_.emplace(std::move(name), std::move(state));
  }
}

void TriggerPolicy::Replace(std::vector<Rule> rules) {
  absl::flat_hash_map<std::string, State> previous = std::move(states_);
  Install(std::move(rules), std::move(previous));
}

void TriggerPolicy::Prune(State* state, absl::Time now) {
  const absl::Duration window = HistoryWindow(state->rule);
  if (window == absl::ZeroDuration()) {
    state->fires.clear();
    return;
  }
  while (!state->fires.empty() && state->fires.front() <= now - window) state->fires.pop_front();
}

TriggerPolicy::Verdict TriggerPolicy::Offer(absl::string_view name, absl::Time now) {
  latest_now_ = std::max(latest_now_, now);
  now = latest_now_;
  auto it = states_.find(name);
  if (it == states_.end()) return Verdict::kUnknown;
  State& state = it->second;
  const Rule& rule = state.rule;
  Prune(&state, now);

  Verdict verdict = Verdict::kFire;
  if (rule.skip_probability > 0 && random_() < rule.skip_probability) {
    verdict = Verdict::kSkipped;
  } else if (state.has_fired && now - state.last_fire < rule.cooldown) {
    verdict = Verdict::kCooldown;
  } else if (rule.max_per_hour > 0 && FiresWithin(state.fires, now, kHour) >= rule.max_per_hour) {
    verdict = Verdict::kHourLimit;
  } else if (rule.max_per_24_h > 0 && state.fires.size() >= rule.max_per_24_h) {
    verdict = Verdict::kDayLimit;
  }

  if (verdict != Verdict::kFire) {
    state.counts.suppressed++;
    totals_.suppressed++;
    return verdict;
  }
  state.has_fired = true;
  state.last_fire = now;
  if (HistoryWindow(rule) > absl::ZeroDuration()) state.fires.push_back(now);
  state.counts.fired++;
  totals_.fired++;
  return verdict;
}

const TriggerPolicy::Rule* TriggerPolicy::Find(absl::string_view name) const {
  auto it = states_.find(name);
  return it == states_.end() ? nullptr : &it->second.rule;
}

TriggerPolicy::Counts TriggerPolicy::counts(absl::string_view name) const {
  auto it = states_.find(name);
  return it == states_.end() ? Counts{} : it->second.counts;
}

size_t TriggerPolicy::HeldFireTimesForTesting(absl::string_view name) const {
  auto it = states_.find(name);
  return it == states_.end() ? 0 : it->second.fires.size();
}

const char* TriggerPolicy::VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFire:
      return "fire";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kCooldown:
      return "cooldown";
    case Verdict::kHourLimit:
      return "max_per_hour";
    case Verdict::kDayLimit:
      return "max_per_24_h";
    case Verdict::kSkipped:
      return "skipped";
  }
  return "?";
}

std::optional<uint64_t> TriggerPolicy::SystemCgroupIdOf(const std::string& path) {
  return CgroupIdOfPath(path);
}

std::optional<PodNames> TriggerPolicy::SystemPodOf(const Incident& incident) {
  return PodOfIncident(incident, &NodeKubernetesNames());
}

std::optional<PodNames> TriggerPolicy::PodOfIncident(const Incident& incident,
                                                     KubernetesNames* names) {
  // The task's cgroup now, if it is still the incident's; else the
  // incident's cgroup found by its id (the task may be gone: a victim).
  std::optional<std::string> path;
  if (incident.pid > 0) {
    path = CgroupPathOfPid(incident.pid);
    if (path.has_value() && incident.cgroup_id != 0 &&
        CgroupIdOfPath(*path) != std::optional<uint64_t>(incident.cgroup_id)) {
      path.reset();
    }
  }
  if (!path.has_value() && incident.cgroup_id != 0) {
    ForEachCgroup(
        [&](const std::string& p, uint64_t id) {
          if (id == incident.cgroup_id) path = p;
        },
        kMaxCgroupsWalked);
  }
  if (!path.has_value()) return std::nullopt;
  return PodNamesOfCgroup(*path, names);
}

namespace {

bool MatchesAny(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace

bool TriggerPolicy::Matches(const Rule::IncidentFilter& filter, const Incident& incident,
                            const CgroupIdOf& cgroup_id_of, const PodOf& pod_of) {
  if (std::find(filter.kinds.begin(), filter.kinds.end(), incident.kind) == filter.kinds.end()) {
    return false;
  }
  if (incident.kind == Incident::Kind::kFatalSignal &&
      std::find(filter.signals.begin(), filter.signals.end(), incident.signal) ==
          filter.signals.end()) {
    return false;
  }
  if (incident.stalled_ns < filter.min_stalled_ns) return false;
  if (!filter.comms.empty() &&
      std::find(filter.comms.begin(), filter.comms.end(), incident.comm) == filter.comms.end()) {
    return false;
  }
  if (!filter.pod_namespaces.empty() || !filter.pods.empty()) {
    const std::optional<PodNames> pod = pod_of(incident);
    if (!pod.has_value()) return false;
    if (!filter.pod_namespaces.empty() && !MatchesAny(filter.pod_namespaces, pod->pod_namespace)) {
      return false;
    }
    if (!filter.pods.empty() && !MatchesAny(filter.pods, pod->pod)) return false;
  }
  if (filter.cgroups.empty()) return true;
  if (incident.cgroup_id == 0) return false;
  for (const std::string& path : filter.cgroups) {
    if (cgroup_id_of(path) == incident.cgroup_id) return true;
  }
  return false;
}

std::vector<std::string> TriggerPolicy::RulesFor(const Incident& incident,
                                                 const CgroupIdOf& cgroup_id_of,
                                                 const PodOf& pod_of) const {
  // The pod is looked up once, and only for a filter that names pods.
  std::optional<std::optional<PodNames>> pod;
  const PodOf pod_once = [&](const Incident& i) {
    if (!pod.has_value()) pod = pod_of(i);
    return *pod;
  };
  std::vector<std::string> names;
  for (const auto& [name, state] : states_) {
    if (state.rule.incident.has_value() &&
        Matches(*state.rule.incident, incident, cgroup_id_of, pod_once)) {
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace ringside::agent
