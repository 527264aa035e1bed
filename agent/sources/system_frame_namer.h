#ifndef RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_
#define RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/sources/stack_sample_writer.h"

namespace ringside::agent {

// The frames of this machine's stacks, named while they are recorded (a
// file is read on another machine): kernel frames from /proc/kallsyms, read
// once; user frames from the process's mappings and the symbol tables of
// its binaries (agent/symbols/). What cannot be named keeps its mapping,
// build id and rel_pc, for Perfetto's offline symbolizer. User frames are
// named only when `proc_root` numbers pids as the BPF programs do (the
// initial PID namespace); else user_frames_unnamed_reason() says why not.
// Then the agent's own binary is read at once (`preload_own_binary`): its
// threads are in every recording's stacks.
std::unique_ptr<FrameNamer> MakeSystemFrameNamer(const std::string& proc_root = "/proc",
                                                 bool preload_own_binary = true);

// A function's name as people read it: a C++ (Itanium ABI) symbol
// demangled; any other, or one that does not demangle, as it is.
// trace_processor shows frame names as the file has them.
std::string DemangledName(absl::string_view mangled);

// Whether the proc mount at `proc_root` numbers pids in the initial PID
// namespace, as the kernel gives them to BPF programs.
bool ProcNumbersPidsAsTheKernelDoes(const std::string& proc_root);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_SYSTEM_FRAME_NAMER_H_
