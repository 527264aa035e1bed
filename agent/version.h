#ifndef RINGSIDE_AGENT_VERSION_H_
#define RINGSIDE_AGENT_VERSION_H_

namespace ringside {

// Written into every trace (SystemInfo.tracing_service_version).
inline constexpr char kVersion[] = "0.1.0-dev";

}  // namespace ringside

#endif  // RINGSIDE_AGENT_VERSION_H_
