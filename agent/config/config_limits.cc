#include "agent/config/config_limits.h"

#include <grp.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::agent {

const std::vector<std::string>& KnownDataSources() {
  static const auto* known = new std::vector<std::string>{"linux.bpf", "linux.ftrace",
                                                          "linux.sys_stats", "linux.process_stats"};
  return *known;
}

namespace {

uint64_t MachineMemoryKb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") return kb;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

}  // namespace

MachineLimits ThisMachine() {
  return {static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)), MachineMemoryKb()};
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& field, const std::string& name) {
  uint32_t number = 0;
  if (absl::SimpleAtoi(name, &number)) return static_cast<gid_t>(number);
  std::vector<char> buf(16384);
  group g;
  group* found = nullptr;
  const int err = getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found);
  if (err != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", name, "': no such group",
                     err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  }
  return found->gr_gid;
}

}  // namespace ringside::agent
