#include "agent/daemon/agent_memory.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/descriptors/cgroup_fs.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {}  // namespace

std::optional<uint64_t> PssOfSmapsRollup(std::string_view text) {
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    if (!absl::ConsumePrefix(&line, "Pss:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return std::nullopt;
    uint64_t kb = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) return std::nullopt;
    return kb * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> CgroupMemoryValue(std::string_view text) {
  const absl::string_view value =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (value == "max") return 0;
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(value, &bytes)) return std::nullopt;
  return bytes;
}

std::optional<std::string> MemoryCgroupV1Path(std::string_view proc_cgroup) {
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(proc_cgroup.data(), proc_cgroup.size()), '\n')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || !absl::StartsWith(parts[2], "/")) continue;
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == "memory") return std::string(parts[2]);
    }
  }
  return std::nullopt;
}

std::optional<std::string> MemoryCgroupV1Mount(std::string_view mounts) {
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(mounts.data(), mounts.size()), '\n')) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 4 || f[2] != "cgroup") continue;
    for (absl::string_view o : absl::StrSplit(f[3], ',')) {
      if (o == "memory") return std::string(f[1]);
    }
  }
  return std::nullopt;
}

namespace {

// Reads a cgroup directory's usage, limit and processes into `m`; false
// when it has no `usage` file (no memory controller there).
bool ReadCgroupDir(const std::string& dir, const char* usage, const char* limit, AgentMemory* m) {
  const std::optional<std::string> current = base::ReadSmallFile(dir + "/" + usage);
  if (!current.has_value()) return false;
  m->cgroup_bytes = CgroupMemoryValue(*current).value_or(0);
  if (std::optional<std::string> max = base::ReadSmallFile(dir + "/" + limit)) {
    m->cgroup_limit_bytes = CgroupMemoryValue(*max).value_or(0);
    // cgroup v1 says "no limit" with the largest page count it holds.
    if (m->cgroup_limit_bytes >= (uint64_t{1} << 60)) m->cgroup_limit_bytes = 0;
  }
  if (std::optional<std::string> procs = base::ReadSmallFile(dir + "/cgroup.procs")) {
    const std::string self = std::to_string(getpid());
    for (absl::string_view pid : absl::StrSplit(*procs, '\n', absl::SkipEmpty())) {
      if (pid != self) m->cgroup_other_processes++;
    }
  }
  return true;
}

}  // namespace

AgentMemory ReadAgentMemory() {
  AgentMemory m;
  if (std::optional<std::string> rollup = base::ReadSmallFile("/proc/self/smaps_rollup")) {
    m.proportional_bytes = PssOfSmapsRollup(*rollup).value_or(0);
  }
  // cgroup v2's memory controller; else v1's (a hybrid layout, where v2 has
  // no controllers).
  const std::string& mount = Cgroup2Mount();
  const std::optional<std::string> v2 = CgroupPathOfPid(getpid());
  if (!mount.empty() && v2.has_value() && !HasDotDot(*v2) &&
      ReadCgroupDir(mount + (*v2 == "/" ? "" : *v2), "memory.current", "memory.max", &m)) {
    m.cgroup = *v2;
    return m;
  }
  const std::optional<std::string> proc_cgroup = base::ReadSmallFile("/proc/self/cgroup");
  const std::optional<std::string> mounts = base::ReadSmallFile("/proc/self/mounts");
  if (!proc_cgroup.has_value() || !mounts.has_value()) return m;
  const std::optional<std::string> v1 = MemoryCgroupV1Path(*proc_cgroup);
  const std::optional<std::string> v1_mount = MemoryCgroupV1Mount(*mounts);
  if (!v1.has_value() || !v1_mount.has_value() || HasDotDot(*v1)) return m;
  if (ReadCgroupDir(*v1_mount + (*v1 == "/" ? "" : *v1), "memory.usage_in_bytes",
                    "memory.limit_in_bytes", &m)) {
    m.cgroup = *v1;
  }
  return m;
}

}  // namespace ringside::agent
