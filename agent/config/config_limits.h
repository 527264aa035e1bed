#ifndef RINGSIDE_AGENT_CONFIG_CONFIG_LIMITS_H_
#define RINGSIDE_AGENT_CONFIG_CONFIG_LIMITS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside::agent {

// What a config may say: the limits of its values, the data sources this
// build runs, and what the machine offers (its CPUs and memory, its
// groups). The validation (config_validation.h) checks a config against
// them; the loader, which calls the validation, includes this header for
// its users.

// Limits of config values, checked at parse time (docs/config.md names them).
// TraceBuffer offsets are 32-bit.
inline constexpr uint64_t kMinBufferSizeKb = 4;
inline constexpr uint64_t kMaxBufferSizeKb = ((uint64_t{1} << 32) - 4096) / 1024;
// A BPF ring's size is a power of two that fits the kernel's 32-bit
// max_entries: 2 GiB.
inline constexpr uint64_t kMaxBpfRingSizeKb = uint64_t{1} << 21;
// bpf_config.stacks: the kernel's perf_event_max_stack default (a deeper
// stack map is refused), and map sizes that stay within a machine's means.
inline constexpr uint32_t kMaxStackDepth = 127;
inline constexpr uint32_t kMaxBlockedThreads = 1 << 20;
// stacks.blocked_period_us: a second (the kernel draws from 32 random bits).
inline constexpr uint32_t kMaxBlockedPeriodUs = 1000000;
// stacks.cpu_hz: a sample a millisecond per CPU at most.
inline constexpr uint32_t kMaxCpuSampleHz = 1000;
// Per CPU; beyond this the kernel's page allocation fails on any machine
// that would want it.
inline constexpr uint64_t kMaxFtraceBufferSizeKb = uint64_t{1} << 21;
// trigger_config.triggers.stop_delay_ms: a snapshot this long after its
// trigger; later, the buffers no longer hold the moment it was fired for.
inline constexpr uint32_t kMaxTriggerStopDelayMs = 600'000;
// trigger_config.triggers.cooldown_ms: a day; a longer pause is
// max_per_24_h: 1.
inline constexpr uint32_t kMaxTriggerCooldownMs = 86'400'000;
// The BPF programs' tgid filter table (RS_MAX_FILTER_TGIDS; the BPF source
// asserts that the two agree).
inline constexpr int kMaxFilterTgids = 16;
// A trigger's name travels in control requests, file names and the trace:
// short, and of characters that need no quoting anywhere.
inline constexpr size_t kMaxTriggerNameBytes = 64;
// Names the agent's own snapshot tally keeps for itself (TriggerTally's
// rows: every `ringside snapshot`, SIGUSR1, and the row that takes names
// past its table), and the prefix of a requested snapshot's file reason
// (snapshot_retention.h): a trigger of one of these names would be counted,
// or kept by retention, as something it is not.
inline constexpr const char* kReservedTriggerNames[] = {"request", "signal", "other"};
inline constexpr char kReservedTriggerNamePrefix[] = "request-";
// max_per_hour and max_per_24_h: the agent keeps one timestamp per fire in
// a window, so the limits bound its memory. Beyond a snapshot every 9 s
// all day, a limit is no limit.
inline constexpr uint32_t kMaxTriggerFiresPerWindow = 10000;
// A trigger's incident filter: task names as the kernel keeps them
// (TASK_COMM_LEN less its NUL).
inline constexpr size_t kMaxCommBytes = 15;
// A Kubernetes name (a pod's, a namespace's): a DNS subdomain, at most 253
// bytes.
inline constexpr size_t kMaxKubernetesNameBytes = 253;
// A trigger's incident filter: cgroup paths, as the kernel's PATH_MAX allows.
inline constexpr size_t kMaxCgroupPathBytes = 4095;
// linux.bpf's filter_container_id: a container id or a prefix of one as
// `docker ps` shortens them (12 hex digits) or longer.
inline constexpr size_t kMinContainerIdPrefix = 12;
inline constexpr size_t kContainerIdDigits = 64;
// linux.bpf's filter_container_id and filter_cgroup_path together (each
// names at least one of the filter's RS_MAX_FILTER_CGROUPS cgroups).
inline constexpr int kMaxCgroupFilterValues = 256;

// Data sources this build can run.
const std::vector<std::string>& KnownDataSources();

// What the per-CPU kernel buffers are checked against: together they may
// take at most half of the machine's memory.
struct MachineLimits {
  int cpus = 1;
  uint64_t memory_kb = 0;  // 0: unknown, not checked.
};
MachineLimits ThisMachine();
// The group `name` names, for the config field `field` (control_group,
// output_group): a number is taken as is; a name must exist on this
// machine. kInvalidArgument naming the field and the group otherwise.
absl::StatusOr<gid_t> ResolveGroup(const std::string& field, const std::string& name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONFIG_CONFIG_LIMITS_H_
