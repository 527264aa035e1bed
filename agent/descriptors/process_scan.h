#ifndef RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
#define RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_

#include <cstdint>
#include <string>

#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// A ProcessTree packet of every process and thread in /proc as this
// process sees it (its PID namespace): pid, ppid, uid, cmdline and cgroup
// v2 (SetCgroupOfProcess) of each process (a kernel thread's comm as its
// cmdline, as Perfetto does), tid, tgid and name of each thread. Processes
// that end during the scan are left out, or listed with their main thread
// named by the process's name if they end between the reads of their
// files; threads that end are left out. Stamped with CLOCK_BOOTTIME at the
// start and the end of the scan.
trace::TracePacket ScanProcesses();
// The same of a /proc tree at `proc_root` (tests give one of their own).
trace::TracePacket ScanProcessesIn(const std::string& proc_root);

// Fills a process descriptor's cgroup fields: `cgroup_id` unless 0,
// `cgroup_path` unless empty, and the container, pod and runtime the path
// names (ParseContainerIdentity).
void SetCgroupOfProcess(uint64_t cgroup_id, const std::string& cgroup_path,
                        trace::ProcessTree::Process* process);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
