#ifndef RINGSIDE_AGENT_DESCRIPTORS_CONTAINER_IDENTITY_H_
#define RINGSIDE_AGENT_DESCRIPTORS_CONTAINER_IDENTITY_H_

#include <string>
#include <string_view>

namespace ringside::agent {

// The container a cgroup v2 path names, as container runtimes and the
// kubelet lay out their cgroups. Any field may be empty: a pod's own cgroup
// (or its CRI-O conmon) names a pod and no container; a bare docker cgroup
// names no pod.
struct ContainerIdentity {
  // 64 lowercase hex digits, as the runtime shows it (`docker ps
  // --no-trunc`, `crictl ps`).
  std::string container_id;
  // The Kubernetes pod's UID with dashes (8-4-4-4-12 lowercase hex), as
  // `kubectl get pod -o jsonpath='{.metadata.uid}'` prints it.
  std::string pod_uid;
  // "docker", "containerd", "cri-o" or "podman"; empty when the path names a
  // container id without saying whose (a bare id under a cgroupfs pod).
  std::string runtime;

  bool empty() const { return container_id.empty() && pod_uid.empty(); }
};

// Reads the container and pod from a cgroup v2 path (the `0::` line of
// /proc/PID/cgroup). Understands, with the kubelet's QoS levels
// (guaranteed pods sit directly under kubepods, burstable and besteffort
// ones one level down):
//   docker, cgroupfs driver    /docker/<id>
//   docker, systemd driver     /system.slice/docker-<id>.scope
//   containerd, systemd        /kubepods.slice/kubepods-burstable.slice/
//                                kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//   containerd, cgroupfs       /kubepods/burstable/pod<uid>/<id>
//   containerd, systemd names
//     in cgroupfs layout       /system.slice/containerd.service/
//                                kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>
//   CRI-O                      .../crio-<id>.scope (crio-conmon-<id>.scope is the monitor:
//                                no container)
//   podman                     .../libpod-<id>.scope (libpod-conmon-<id>.scope: no container)
// where <uid_> is the pod UID with '_' for '-'. The deepest component that
// names a container wins (a process in a sub-cgroup of its container, nested
// containers). A container id is exactly 64 lowercase hex digits; anything
// else is not one. Never reads past `cgroup_path`; any bytes are safe.
ContainerIdentity ParseContainerIdentity(std::string_view cgroup_path);

// Whether `id` is a full container id: 64 lowercase hex digits.
bool IsContainerId(std::string_view id);

// Whether `uid` is a pod UID as the kubelet writes it: 8-4-4-4-12
// lowercase hex digits joined by dashes.
bool IsPodUid(std::string_view uid);

// The first 12 digits of a container id, as `docker ps` shows it.
std::string_view ShortContainerId(std::string_view container_id);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_CONTAINER_IDENTITY_H_
