#ifndef RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
#define RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/descriptors/kubernetes_names.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// A ProcessTree packet of every process and thread in /proc as this
// process sees it (its PID namespace): pid, ppid, uid, cmdline and cgroup
// v2 (SetCgroupOfProcess) of each process (a kernel thread's comm as its
// cmdline, as Perfetto does), and the Kubernetes names of its pod
// (NodeKubernetesNames()); tid, tgid and name of each thread. Processes
// that end during the scan are left out, or listed with their main thread
// named by the process's name if they end between the reads of their
// files; threads that end are left out. Stamped with CLOCK_BOOTTIME at the
// start and the end of the scan.
trace::TracePacket ScanProcesses();
// The same of a /proc tree at `proc_root` (tests give one of their own).
trace::TracePacket ScanProcessesIn(const std::string& proc_root,
                                   KubernetesNames* names = &NodeKubernetesNames());

// Fills a process descriptor's cgroup fields: `cgroup_id` unless 0,
// `cgroup_path` unless empty, and the container, pod and runtime the path
// names (ParseContainerIdentity).
void SetCgroupOfProcess(uint64_t cgroup_id, const std::string& cgroup_path,
                        trace::ProcessTree::Process* process);

// The Kubernetes names of a process's pod and container (its cgroup's
// ParseContainerIdentity), if `names` knows them; nullopt outside a pod.
std::optional<PodNames> PodNamesOfCgroup(const std::string& cgroup_path, KubernetesNames* names);
// Fills a process descriptor's k8s_* fields; nothing when `names` is unset.
void SetPodNamesOfProcess(const std::optional<PodNames>& names,
                          trace::ProcessTree::Process* process);

// What trace_processor and ui.perfetto.dev show of a process's pod: a
// TrackDescriptor packet at `ts` labelling `process` "namespace=N",
// "pod=P" and "container=C" (the last when known), which the importer
// keeps as the process's args chrome.process_label[0..2]; nullopt when
// the descriptor has no k8s names. Its track's uuid is the same for every
// description of the process: a hash of its pid, pod UID and container id.
std::optional<trace::TracePacket> PodLabelsPacket(uint64_t ts,
                                                  const trace::ProcessTree::Process& process);
// PodLabelsPacket() of each process in a ProcessTree packet, at its time.
std::vector<trace::TracePacket> PodLabelsPackets(const trace::TracePacket& process_tree);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_PROCESS_SCAN_H_
