#ifndef RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
#define RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_

#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// A ProcessTree packet of every process and thread in /proc as this
// process sees it (its PID namespace): pid, ppid, uid and cmdline of each
// process (a kernel thread's comm as its cmdline, as Perfetto does), tid,
// tgid and name of each thread. Processes that end during the scan are
// left out. Stamped with CLOCK_BOOTTIME at the start and the end of the scan.
trace::TracePacket ScanProcesses();

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
