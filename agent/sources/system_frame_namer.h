#ifndef RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_
#define RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_

#include <memory>

#include "agent/sources/stack_sample_writer.h"

namespace ringside::agent {

// The frames of this machine's stacks, named while they are recorded (a
// file is read on another machine): kernel frames from /proc/kallsyms, read
// once; user frames from the process's mappings and the symbol tables of
// its binaries (agent/symbols/). What cannot be named keeps its mapping,
// build id and rel_pc, for Perfetto's offline symbolizer.
std::unique_ptr<FrameNamer> MakeSystemFrameNamer();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_
