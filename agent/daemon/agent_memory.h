#ifndef RINGSIDE_AGENT_DAEMON_AGENT_MEMORY_H_
#define RINGSIDE_AGENT_DAEMON_AGENT_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ringside::agent {

// This process's memory, as `status` reports it: what its memory cgroup
// counts (and kills on), and its own pages each counted once (Pss): resident
// memory counts every page of a shared library, however many share it.
struct AgentMemory {
  // The cgroup of its memory controller: cgroup v2's, else v1's (a hybrid
  // layout); empty without one.
  std::string cgroup;
  uint64_t cgroup_bytes = 0;        // memory.current (v1: memory.usage_in_bytes).
  uint64_t cgroup_limit_bytes = 0;  // memory.max (v1: memory.limit_in_bytes); 0: none.
  uint32_t cgroup_other_processes = 0;
  uint64_t proportional_bytes = 0;  // Pss, of /proc/self/smaps_rollup.
};

// Reads it now (a few files of /proc and the cgroup; the smaps walk takes
// about a millisecond per 100 MiB mapped). Fields it cannot read stay 0.
AgentMemory ReadAgentMemory();

// The "Pss:" of a /proc/PID/smaps_rollup text, in bytes.
std::optional<uint64_t> PssOfSmapsRollup(std::string_view text);
// The memory controller's cgroup in a /proc/PID/cgroup text under cgroup
// v1 (the "N:...memory...:/path" line), and where /proc/PID/mounts has
// that controller's hierarchy mounted.
std::optional<std::string> MemoryCgroupV1Path(std::string_view proc_cgroup);
std::optional<std::string> MemoryCgroupV1Mount(std::string_view mounts);
// A cgroup memory file's value ("12345\n"; "max\n" is 0, no limit).
std::optional<uint64_t> CgroupMemoryValue(std::string_view text);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_AGENT_MEMORY_H_
