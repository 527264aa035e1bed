#ifndef RINGSIDE_BASE_VERSION_H_
#define RINGSIDE_BASE_VERSION_H_

namespace ringside::base {

// The version of the ringside binary: `ringside --version`, the agent's
// status and start line, and every trace (SystemInfo.tracing_service_version).
inline constexpr char kVersion[] = "0.1.0-dev";

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_VERSION_H_
