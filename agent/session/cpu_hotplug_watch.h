#ifndef RINGSIDE_AGENT_SESSION_CPU_HOTPLUG_WATCH_H_
#define RINGSIDE_AGENT_SESSION_CPU_HOTPLUG_WATCH_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"

namespace ringside::agent {

// The CPUs of a kernel CPU list ("0-3,6,8-9\n", as in
// /sys/devices/system/cpu/online); nullopt if `text_untrusted` is not one.
std::optional<std::set<int>> ParseCpuList(absl::string_view text_untrusted);

// Says when a CPU goes offline or comes back while recording (hotplug,
// `echo 0 > /sys/devices/system/cpu/cpuN/online`), so that a gap in a CPU's
// events has its reason in the log. Recording itself needs nothing: the
// BPF rings are per possible CPU, and the ftrace source opens a CPU's
// reader once it is online.
//
// Reads the online list each Poll() through one descriptor kept open (as
// sysfs attributes are meant to be read again: from offset 0), and parses
// it only when its text changed; one thread polls. Opening, reading and
// parsing it every second was a tenth of the buffer owner's CPU in the
// mixed workload of bench-peers.
class CpuHotplugWatch {
 public:
  static constexpr char kOnlinePath[] = "/sys/devices/system/cpu/online";

  explicit CpuHotplugWatch(std::string online_path = kOnlinePath);
  // One line per CPU that went offline or came online since the last call
  // (or construction), e.g. "CPU 1 went offline: ...", "CPU 1 came online:
  // ...". Empty when nothing changed or the list cannot be
  // read.
  std::vector<std::string> Poll();

 private:
  // Reads the list's text as it is now into text_; false when it cannot.
  bool ReadText();

  std::string online_path_;
  base::ScopedFd fd_;                    // Invalid until opened (again after a failure).
  std::string text_;                     // As last read; empty: unknown.
  std::optional<std::set<int>> online_;  // As last parsed.
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_CPU_HOTPLUG_WATCH_H_
