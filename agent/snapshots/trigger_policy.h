#ifndef RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_POLICY_H_
#define RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/descriptors/kubernetes_names.h"
#include "agent/sources/incident.h"
#include "ringside/config/trace_config.pb.h"

namespace ringside::agent {

// Decides whether a named trigger fires a snapshot, by the rules of
// trigger_config.triggers: an unknown name never fires; a known one is first
// skipped with its skip_probability (drawn before any limit, as Perfetto
// does), then held back by its cooldown since its last fire, then by its
// fires in the sliding hour and the sliding 24 hours before `now`.
//
//   fires of one rule:    x         x    x              x
//   time:            ----|---------|----|-----...------|----> now
//                         \_____ within the last hour ______/  counts toward
//                                                             max_per_hour
//
// A fire at t counts toward a window of length W until t + W (exclusive), so
// the (limit + 1)-th fire comes exactly W after the first of the window.
//
// Invariants: only kFire records a fire; a rule holds at most its largest
// limit of fire times (limits are capped at kMaxTriggerFiresPerWindow), none
// when it has no limit, so memory is bounded by the rules, not the requests.
// `now` never goes back: an earlier time than one already seen is taken as
// the latest seen, so a clock stepped back cannot reopen a window.
//
// Pure logic, no clock and no threads of its own: not thread-safe; the
// caller serialises calls.
class TriggerPolicy {
 public:
  // One entry of trigger_config.triggers, defaults applied.
  struct Rule {
    std::string name;
    // Least time from one fire to the next; zero: none.
    absl::Duration cooldown;
    // Fires in any sliding hour / 24 hours; 0: unlimited. Values above
    // kMaxTriggerFiresPerWindow are taken as that.
    uint32_t max_per_hour = 0;
    uint32_t max_per_24_h = 0;
    // In [0, 1]: the chance a request is skipped.
    double skip_probability = 0;
    // From the trigger to the snapshot. Carried for the caller; Offer does
    // not use it.
    absl::Duration stop_delay;
    // The incidents that fire this rule by themselves (config's `incident`,
    // `blocked` or `runqueue_delay`); none: only requests by name do.
    struct IncidentFilter {
      std::vector<Incident::Kind> kinds;
      // kFatalSignal: the signals that count (the config's, or the crash
      // signals by default).
      std::vector<int32_t> signals;
      // Task names; empty: any.
      std::vector<std::string> comms;
      // cgroup v2 paths below the cgroup2 mount; empty: any. The task's own
      // cgroup must be one of them.
      std::vector<std::string> cgroups;
      // Shell patterns (fnmatch) of the task's Kubernetes namespace and pod
      // name; empty: any. A task in no pod passes neither.
      std::vector<std::string> pod_namespaces = {};
      std::vector<std::string> pods = {};
      // kBlocked, kRunqueueDelay (the config's `blocked` and
      // `runqueue_delay`): the least stall that passes.
      int64_t min_stalled_ns = 0;
    };
    std::optional<IncidentFilter> incident;
  };

  enum class Verdict { kFire, kUnknown, kCooldown, kHourLimit, kDayLimit, kSkipped };

  struct Counts {
    uint64_t fired = 0;
    // Every verdict other than kFire and kUnknown.
    uint64_t suppressed = 0;
  };

  // `random` returns a uniform value in [0, 1); it is called only for a
  // rule with a skip_probability above 0. The default draws from a
  // generator seeded by std::random_device.
  // REQUIRES: rule names are unique (the config loader checks); of
  // duplicates the first is used.
  explicit TriggerPolicy(std::vector<Rule> rules, std::function<double()> random = UniformRandom());

  // The rules of `config.trigger_config.triggers`, in order, with defaults
  // for fields left unset (cooldown_ms: kDefaultTriggerCooldownMs).
  static std::vector<Rule> RulesFrom(const config::TraceConfig& config);

  // The one rule of snapshots requested by hand, named `name`: the
  // config's snapshot_request_cooldown_ms and max_snapshot_requests_per_hour
  // (ApplyAgentDefaults fills them in).
  static Rule RequestRuleFrom(const config::TraceConfig& config, absl::string_view name);

  // The verdict on a request for trigger `name` at `now`; kFire records a
  // fire at `now` (the caller then takes the snapshot).
  Verdict Offer(absl::string_view name, absl::Time now);

  // The rule named `name`, or nullptr. Valid until the next Replace.
  const Rule* Find(absl::string_view name) const;

  // The cgroup v2 id of the cgroup at `path` below the cgroup2 root;
  // nullopt when there is none.
  using CgroupIdOf = std::function<std::optional<uint64_t>(const std::string& path)>;
  // Looks paths up below the cgroup2 mount (/sys/fs/cgroup, or
  // /sys/fs/cgroup/unified on hybrid systems): the id is the directory's
  // inode number, as the kernel's kernfs gives it.
  static std::optional<uint64_t> SystemCgroupIdOf(const std::string& path);

  // The Kubernetes pod of an incident's task; nullopt when it is in none,
  // or in one the node does not name.
  using PodOf = std::function<std::optional<PodNames>(const Incident& incident)>;
  // The task's cgroup (from /proc while it lives, else found by the
  // incident's cgroup id among at most kMaxCgroupsWalked cgroups), named
  // by the node's kubelet directories (NodeKubernetesNames()).
  static std::optional<PodNames> SystemPodOf(const Incident& incident);
  // SystemPodOf() with the names of `names`.
  static std::optional<PodNames> PodOfIncident(const Incident& incident, KubernetesNames* names);
  static constexpr size_t kMaxCgroupsWalked = 65536;

  // The names of the rules whose incident filter `incident` passes, in no
  // particular order (the caller Offer()s each). Filters with cgroups look
  // them up with `cgroup_id_of` now: cgroups come and go (a container
  // started after the config was loaded), incidents are rare.
  // Filters with pods look the incident's pod up once, with `pod_of`.
  std::vector<std::string> RulesFor(const Incident& incident,
                                    const CgroupIdOf& cgroup_id_of = SystemCgroupIdOf,
                                    const PodOf& pod_of = SystemPodOf) const;
  // Whether `incident` passes `filter`. An incident whose cgroup is unknown
  // (0) never passes a filter that names cgroups.
  static bool Matches(const Rule::IncidentFilter& filter, const Incident& incident,
                      const CgroupIdOf& cgroup_id_of = SystemCgroupIdOf,
                      const PodOf& pod_of = SystemPodOf);

  // Swaps in new rules (config reload). A rule whose name stays keeps its
  // fire history and counts, now judged by its new settings; others start
  // afresh. The totals of counts() keep what removed rules counted.
  void Replace(std::vector<Rule> rules);

  // Since construction, over all rules ever held.
  Counts counts() const { return totals_; }
  // Of the rule named `name` while it is held; zero for an unknown name.
  Counts counts(absl::string_view name) const;

  // "fire", "unknown", "cooldown", "max_per_hour", "max_per_24_h",
  // "skipped": the config field that held a request back, for logs and
  // status.
  static const char* VerdictName(Verdict verdict);

  // The default random source.
  static std::function<double()> UniformRandom();

  // How many fire times the rule `name` holds (its memory).
  size_t HeldFireTimesForTesting(absl::string_view name) const;

 private:
  struct State {
    Rule rule;
    bool has_fired = false;
    absl::Time last_fire;
    // Fire times, oldest first, within the longest window with a limit.
    std::deque<absl::Time> fires;
    Counts counts;
  };

  void Install(std::vector<Rule> rules, absl::flat_hash_map<std::string, State> previous);
  // Drops fire times that no window with a limit can see from `now`.
  static void Prune(State* state, absl::Time now);

  std::function<double()> random_;
  absl::flat_hash_map<std::string, State> states_;
  absl::Time latest_now_ = absl::InfinitePast();
  Counts totals_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SNAPSHOTS_TRIGGER_POLICY_H_
