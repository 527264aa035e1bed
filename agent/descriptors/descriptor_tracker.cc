#include "agent/descriptors/descriptor_tracker.h"

#include "absl/strings/str_split.h"
#include "agent/descriptors/cgroup_fs.h"
#include "agent/descriptors/process_scan.h"

namespace ringside::agent {
namespace {

using Kind = buffer::DurableStore::Kind;
constexpr uint64_t kCloneThread = 0x00010000;  // CLONE_THREAD

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

DescriptorTracker::DescriptorTracker() : DescriptorTracker(CgroupLookup{}) {}

DescriptorTracker::DescriptorTracker(CgroupLookup lookup) : cgroup_lookup_(std::move(lookup)) {
  if (!cgroup_lookup_.path_of_pid) cgroup_lookup_.path_of_pid = CgroupPathOfPid;
  if (!cgroup_lookup_.id_of_path) cgroup_lookup_.id_of_path = CgroupIdOfPath;
}

void DescriptorTracker::RememberCgroup(uint64_t id, const std::string& path) {
  if (id == 0 || path.empty()) return;
  if (cgroup_paths_.size() >= kMaxRememberedCgroups && !cgroup_paths_.contains(id)) {
    cgroup_paths_.erase(cgroup_paths_.begin());
  }
  cgroup_paths_[id] = path;
}

std::pair<uint64_t, std::string> DescriptorTracker::CgroupAtExec(int32_t tid, uint64_t cgroup_id) {
  if (cgroup_id != 0) {
    absl::MutexLock lock(&mu_);
    auto it = cgroup_paths_.find(cgroup_id);
    if (it != cgroup_paths_.end()) return {cgroup_id, it->second};
  }
  std::optional<std::string> path = cgroup_lookup_.path_of_pid(tid);
  if (!path.has_value()) return {cgroup_id, {}};  // Gone already.
  const uint64_t id_now = cgroup_lookup_.id_of_path(*path).value_or(0);
  // Moved since the exec: the path is not the one of the reported id.
  if (cgroup_id != 0 && id_now != cgroup_id) return {cgroup_id, {}};
  absl::MutexLock lock(&mu_);
  RememberCgroup(id_now, *path);
  return {id_now, *path};
}

void DescriptorTracker::PutProcess(uint64_t ts, int32_t pid, const Process& p) {
  trace::TracePacket packet;
  packet.set_timestamp(ts);
  trace::ProcessTree::Process* out = packet.mutable_process_tree()->add_processes();
  out->set_pid(pid);
  out->set_ppid(p.ppid);
  if (p.uid >= 0) out->set_uid(static_cast<int32_t>(p.uid));
  for (const std::string& arg : p.cmdline) out->add_cmdline(arg);
  SetCgroupOfProcess(p.cgroup_id, p.cgroup_path, out);
  queue_.push_back(
      Update{Kind::kProcess, static_cast<uint64_t>(pid), false, packet.SerializeAsString()});
}

void DescriptorTracker::PutThread(uint64_t ts, int32_t tid, const Thread& t) {
  trace::TracePacket packet;
  packet.set_timestamp(ts);
  trace::ProcessTree::Thread* out = packet.mutable_process_tree()->add_threads();
  out->set_tid(tid);
  out->set_tgid(t.tgid);
  out->set_name(t.name);
  queue_.push_back(
      Update{Kind::kThread, static_cast<uint64_t>(tid), false, packet.SerializeAsString()});
}

int32_t DescriptorTracker::TgidOf(int32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? tid : it->second.tgid;
}

void DescriptorTracker::Seed(const trace::TracePacket& packet) {
  absl::MutexLock lock(&mu_);
  const uint64_t ts = packet.timestamp();
  for (const trace::ProcessTree::Process& p : packet.process_tree().processes()) {
    if (ended_before_seed_.count(p.pid())) continue;
    Process& proc = processes_[p.pid()];
    proc.ppid = p.ppid();
    proc.uid = p.has_uid() ? p.uid() : -1;
    proc.cmdline.assign(p.cmdline().begin(), p.cmdline().end());
    proc.cgroup_id = p.cgroup_id();
    proc.cgroup_path = p.cgroup_path();
    proc.ts = ts;
    RememberCgroup(proc.cgroup_id, proc.cgroup_path);
    PutProcess(ts, p.pid(), proc);
  }
  for (const trace::ProcessTree::Thread& t : packet.process_tree().threads()) {
    if (ended_before_seed_.count(t.tid())) continue;
    Thread& thread = threads_[t.tid()];
    thread.tgid = t.tgid();
    thread.name = t.name();
    thread.ts = ts;
    PutThread(ts, t.tid(), thread);
  }
  seeded_ = true;
  ended_before_seed_.clear();
}

void DescriptorTracker::OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid,
                               int32_t child_tid, int32_t child_tgid, std::string_view child_comm) {
  absl::MutexLock lock(&mu_);
  auto newer = [ts](const auto& map, int32_t id) {
    auto it = map.find(id);
    return it != map.end() && it->second.ts > ts;
  };
  if (child_tid == child_tgid && !newer(processes_, child_tgid)) {
    // A new process: it starts as a copy of its parent.
    Process p;
    auto parent = processes_.find(parent_tgid);
    if (parent != processes_.end()) p = parent->second;
    p.ppid = parent_tgid;
    p.ts = ts;
    if (p.cmdline.empty()) p.cmdline.emplace_back(child_comm);
    processes_[child_tgid] = p;
    PutProcess(ts, child_tgid, p);
  }
  (void)parent_tid;
  if (newer(threads_, child_tid)) {
    // Only the fork knows which process a renamed thread belongs to.
    Thread& t = threads_[child_tid];
    if (t.tgid != child_tgid) {
      t.tgid = child_tgid;
      PutThread(t.ts, child_tid, t);
    }
    return;
  }
  Thread t{child_tgid, std::string(child_comm), ts};
  threads_[child_tid] = t;
  PutThread(ts, child_tid, t);
}

void DescriptorTracker::OnNewTask(uint64_t ts, int32_t parent_tid, int32_t child_tid,
                                  std::string_view comm, uint64_t clone_flags) {
  int32_t parent_tgid;
  {
    absl::MutexLock lock(&mu_);
    parent_tgid = TgidOf(parent_tid);
  }
  const int32_t child_tgid = (clone_flags & kCloneThread) ? parent_tgid : child_tid;
  OnFork(ts, parent_tid, parent_tgid, child_tid, child_tgid, comm);
}

void DescriptorTracker::OnExec(uint64_t ts, int32_t tid, int32_t tgid, std::string_view filename,
                               std::string_view argv, std::string_view comm, int32_t ppid,
                               int64_t uid, uint64_t cgroup_id) {
  auto [cgroup, cgroup_path] = CgroupAtExec(tid, cgroup_id);
  absl::MutexLock lock(&mu_);
  if (tgid < 0) tgid = TgidOf(tid);
  Process& p = processes_[tgid];
  if (ppid >= 0) p.ppid = ppid;
  if (uid >= 0) p.uid = uid;
  p.ts = ts;
  // Unknown (ftrace, and the process gone): the cgroup it was seen in.
  if (cgroup != 0 || !cgroup_path.empty()) {
    p.cgroup_id = cgroup;
    p.cgroup_path = std::move(cgroup_path);
  }
  p.cmdline.clear();
  for (absl::string_view arg :
       absl::StrSplit(absl::string_view(argv.data(), argv.size()), '\0', absl::SkipEmpty())) {
    p.cmdline.emplace_back(arg);
  }
  if (p.cmdline.empty()) p.cmdline.emplace_back(filename);
  PutProcess(ts, tgid, p);
  // exec leaves one thread, named after the file.
  Thread t{tgid, comm.empty() ? Basename(filename).substr(0, 15) : std::string(comm), ts};
  threads_[tgid] = t;
  PutThread(ts, tgid, t);
}

void DescriptorTracker::OnExit(uint64_t, int32_t tid, int32_t tgid, int group_dead) {
  absl::MutexLock lock(&mu_);
  if (tgid < 0) tgid = TgidOf(tid);
  if (!seeded_) ended_before_seed_.insert(tid);
  threads_.erase(tid);
  queue_.push_back(Update{Kind::kThread, static_cast<uint64_t>(tid), true, {}});
  const bool process_ended = group_dead > 0 || (group_dead < 0 && tid == tgid);
  if (process_ended) {
    processes_.erase(tgid);
    queue_.push_back(Update{Kind::kProcess, static_cast<uint64_t>(tgid), true, {}});
  }
}

void DescriptorTracker::OnRename(uint64_t ts, int32_t tid, std::string_view new_comm) {
  absl::MutexLock lock(&mu_);
  Thread& t = threads_[tid];
  if (t.tgid == 0) t.tgid = tid;
  t.name = std::string(new_comm);
  t.ts = ts;
  PutThread(ts, tid, t);
}

void DescriptorTracker::ApplyTo(buffer::DurableStore* store) {
  std::vector<Update> updates;
  {
    absl::MutexLock lock(&mu_);
    updates.swap(queue_);
  }
  for (const Update& u : updates) {
    if (u.ended) {
      store->MarkEnded(u.kind, u.id);
    } else {
      store->Put(u.kind, u.id, u.packet);
    }
  }
}

size_t DescriptorTracker::remembered_cgroups_for_testing() const {
  absl::MutexLock lock(&mu_);
  return cgroup_paths_.size();
}

size_t DescriptorTracker::live_processes() const {
  absl::MutexLock lock(&mu_);
  return processes_.size();
}

}  // namespace ringside::agent
