#ifndef RINGSIDE_AGENT_OUTPUT_BOOT_RING_STATE_H_
#define RINGSIDE_AGENT_OUTPUT_BOOT_RING_STATE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/output/output_dir.h"

namespace ringside::agent {

// Which boot the agent last recorded into the kernel's persistent ftrace
// instance, kept in the output directory (which outlives a reboot, where
// the run directory does not): `.ringside-boot-ring`, the boot id and a
// newline. At the next boot it tells a ring that was lost (a cold reboot,
// or the kernel reserved other memory) from one never recorded.

inline constexpr char kBootRingStateName[] = ".ringside-boot-ring";

// The boot id the file names; nullopt when there is none, or it is not one
// (longer than a boot id, or holding anything but [0-9a-f-]).
std::optional<std::string> ReadRecordedBoot(const OutputDir& dir);
// Replaces the file with one naming `boot_id` (written beside it, then
// renamed over it; never through a symlink).
absl::Status WriteRecordedBoot(const OutputDir& dir, const std::string& boot_id);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_OUTPUT_BOOT_RING_STATE_H_
