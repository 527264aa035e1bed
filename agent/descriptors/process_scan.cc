#include "agent/descriptors/process_scan.h"

#include <dirent.h>
#include <time.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/descriptors/cgroup_fs.h"
#include "agent/descriptors/container_identity.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {

using trace::TracePacket;

int64_t BoottimeNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void SetCgroupOfProcess(uint64_t cgroup_id, const std::string& cgroup_path,
                        trace::ProcessTree::Process* process) {
  if (cgroup_id != 0) process->set_cgroup_id(cgroup_id);
  if (cgroup_path.empty()) return;
  process->set_cgroup_path(cgroup_path);
  const ContainerIdentity c = ParseContainerIdentity(cgroup_path);
  if (!c.container_id.empty()) process->set_container_id(c.container_id);
  if (!c.pod_uid.empty()) process->set_pod_uid(c.pod_uid);
  if (!c.runtime.empty()) process->set_container_runtime(c.runtime);
}

std::optional<PodNames> PodNamesOfCgroup(const std::string& cgroup_path, KubernetesNames* names) {
  if (names == nullptr || cgroup_path.empty()) return std::nullopt;
  return names->Lookup(ParseContainerIdentity(cgroup_path));
}

void SetPodNamesOfProcess(const std::optional<PodNames>& names,
                          trace::ProcessTree::Process* process) {
  if (!names.has_value()) return;
  process->set_k8s_namespace(names->pod_namespace);
  process->set_k8s_pod(names->pod);
  if (!names->container.empty()) process->set_k8s_container(names->container);
}

std::optional<trace::TracePacket> PodLabelsPacket(uint64_t ts,
                                                  const trace::ProcessTree::Process& process) {
  if (!process.has_k8s_pod()) return std::nullopt;
  // FNV-1a: stable across agents and files, so that every file of the
  // node names a process by one track.
  uint64_t uuid = 14695981039346656037ull;
  for (const std::string& part :
       {absl::StrCat(process.pid()), process.pod_uid(), process.container_id()}) {
    for (unsigned char c : part + '/') uuid = (uuid ^ c) * 1099511628211ull;
  }
  TracePacket packet;
  packet.set_timestamp(ts);
  trace::TrackDescriptor* track = packet.mutable_track_descriptor();
  track->set_uuid(uuid);
  trace::ProcessDescriptor* p = track->mutable_process();
  p->set_pid(process.pid());
  p->add_process_labels(absl::StrCat("namespace=", process.k8s_namespace()));
  p->add_process_labels(absl::StrCat("pod=", process.k8s_pod()));
  if (process.has_k8s_container()) {
    p->add_process_labels(absl::StrCat("container=", process.k8s_container()));
  }
  return packet;
}

std::vector<trace::TracePacket> PodLabelsPackets(const trace::TracePacket& process_tree) {
  std::vector<trace::TracePacket> out;
  for (const trace::ProcessTree::Process& p : process_tree.process_tree().processes()) {
    if (std::optional<TracePacket> labels = PodLabelsPacket(process_tree.timestamp(), p)) {
      out.push_back(*std::move(labels));
    }
  }
  return out;
}

trace::TracePacket ScanProcesses() { return ScanProcessesIn("/proc"); }

trace::TracePacket ScanProcessesIn(const std::string& proc_root, KubernetesNames* names) {
  TracePacket packet;
  packet.set_timestamp(static_cast<uint64_t>(BoottimeNs()));
  trace::ProcessTree* tree = packet.mutable_process_tree();
  DIR* proc = opendir(proc_root.c_str());
  if (proc == nullptr) return packet;
  // Most processes share a few cgroups: each is looked up once.
  absl::flat_hash_map<std::string, uint64_t> cgroup_ids;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    const std::string dir = absl::StrCat(proc_root, "/", pid);
    const std::string status = base::ReadSmallFileOrEmpty(dir + "/status");
    if (status.empty()) continue;  // Gone meanwhile.
    trace::ProcessTree::Process* p = tree->add_processes();
    p->set_pid(pid);
    std::string comm;
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      if (absl::ConsumePrefix(&line, "PPid:")) {
        int ppid = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &ppid)) p->set_ppid(ppid);
      } else if (absl::ConsumePrefix(&line, "Uid:")) {
        int uid = 0;
        std::vector<std::string> ids = absl::StrSplit(absl::StripAsciiWhitespace(line), '\t');
        if (!ids.empty() && absl::SimpleAtoi(ids[0], &uid)) p->set_uid(uid);
      } else if (absl::ConsumePrefix(&line, "Name:")) {
        comm = std::string(absl::StripAsciiWhitespace(line));
      }
    }
    const std::string cmdline = base::ReadSmallFileOrEmpty(dir + "/cmdline");
    if (cmdline.empty()) {
      p->add_cmdline(comm);  // Kernel threads: the comm, as Perfetto does.
    } else {
      for (absl::string_view arg : absl::StrSplit(cmdline, '\0', absl::SkipEmpty())) {
        p->add_cmdline(std::string(arg));
      }
    }
    if (std::optional<std::string> cgroup =
            CgroupPathInProcFile(base::ReadSmallFileOrEmpty(dir + "/cgroup"))) {
      *cgroup = CgroupPathBelowMount(*cgroup);
      auto [it, added] = cgroup_ids.try_emplace(*cgroup, 0);
      if (added) it->second = CgroupIdOfPath(*cgroup).value_or(0);
      SetCgroupOfProcess(it->second, *cgroup, p);
      SetPodNamesOfProcess(PodNamesOfCgroup(*cgroup, names), p);
    }
    // Its threads; the main thread always, by the process's name if it
    // went meanwhile (a process must not be left with a nameless thread).
    bool main_listed = false;
    auto add_thread = [&](int tid, std::string name) {
      trace::ProcessTree::Thread* thread = tree->add_threads();
      thread->set_tid(tid);
      thread->set_tgid(pid);
      thread->set_name(std::move(name));
      main_listed |= tid == pid;
    };
    if (DIR* tasks = opendir((dir + "/task").c_str())) {
      while (dirent* t = readdir(tasks)) {
        int tid = 0;
        if (!absl::SimpleAtoi(t->d_name, &tid)) continue;
        std::string name(absl::StripTrailingAsciiWhitespace(
            base::ReadSmallFileOrEmpty(absl::StrCat(dir, "/task/", tid, "/comm"))));
        if (name.empty() && tid != pid) continue;  // Gone meanwhile.
        add_thread(tid, name.empty() ? comm : std::move(name));
      }
      closedir(tasks);
    }
    if (!main_listed) add_thread(pid, comm);
  }
  closedir(proc);
  tree->set_collection_end_timestamp(static_cast<uint64_t>(BoottimeNs()));
  return packet;
}

}  // namespace ringside::agent
