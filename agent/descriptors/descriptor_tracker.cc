#include "agent/descriptors/descriptor_tracker.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "agent/descriptors/cgroup_fs.h"
#include "agent/descriptors/process_scan.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

using Kind = buffer::DurableStore::Kind;
constexpr uint64_t kCloneThread = 0x00010000;  // CLONE_THREAD

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::optional<PodNames> NodePodNamesOfCgroup(const std::string& path) {
  return PodNamesOfCgroup(path, &NodeKubernetesNames());
}

// The TracePacket {process_tree: `tree`, timestamp: `ts`}, serialized as
// TracePacket::SerializeAsString() would (fields in their numbers' order),
// without building the packet around the tree.
std::string ProcessTreePacket(const trace::ProcessTree& tree, uint64_t ts) {
  const size_t tree_bytes = tree.ByteSizeLong();
  std::string out;
  out.reserve(2 * (buffer::kMaxTagSize + buffer::kMaxVarIntSize) + tree_bytes);
  buffer::AppendTag(trace::TracePacket::kProcessTreeFieldNumber, buffer::WireType::kLengthDelimited,
                    &out);
  buffer::AppendVarInt(tree_bytes, &out);
  const size_t at = out.size();
  out.resize(at + tree_bytes);
  tree.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data()) + at);
  buffer::AppendVarIntField(trace::TracePacket::kTimestampFieldNumber, ts, &out);
  return out;
}

}  // namespace

DescriptorTracker::DescriptorTracker() : DescriptorTracker(CgroupLookup{}) {}

DescriptorTracker::DescriptorTracker(CgroupLookup lookup) : cgroup_lookup_(std::move(lookup)) {
  if (!cgroup_lookup_.path_of_pid) cgroup_lookup_.path_of_pid = CgroupPathOfPid;
  if (!cgroup_lookup_.id_of_path) cgroup_lookup_.id_of_path = CgroupIdOfPath;
  if (!cgroup_lookup_.pod_names_of) cgroup_lookup_.pod_names_of = NodePodNamesOfCgroup;
}

DescriptorTracker::CgroupOfTask DescriptorTracker::CgroupAtExec(int32_t tid, uint64_t cgroup_id) {
  CgroupOfTask out{cgroup_id, {}, std::nullopt};
  {
    absl::MutexLock lock(&mu_);
    out.path = cgroup_paths_.Find(cgroup_id);
  }
  if (out.path.empty()) {
    std::optional<std::string> path = cgroup_lookup_.path_of_pid(tid);
    if (!path.has_value()) return out;  // Gone already.
    out.id = cgroup_lookup_.id_of_path(*path).value_or(0);
    // Moved since the exec: the path is not the one of the reported id.
    if (cgroup_id != 0 && out.id != cgroup_id) return {cgroup_id, {}, std::nullopt};
    absl::MutexLock lock(&mu_);
    cgroup_paths_.Remember(out.id, *path);
    out.path = *std::move(path);
  }
  out.pod = cgroup_lookup_.pod_names_of(out.path);
  return out;
}

template <typename Entry>
Entry* DescriptorTracker::EntryAt(absl::node_hash_map<int32_t, Entry>& map, int32_t id,
                                  uint64_t ts) {
  auto [it, inserted] = map.try_emplace(id);
  Entry& e = it->second;
  if (inserted) return &e;
  if (e.exit_ts != 0 && ts > e.exit_ts) {
    e = Entry{};  // A new task under the id of one that exited.
    return &e;
  }
  return ts < e.ts ? nullptr : &e;
}

void DescriptorTracker::PutProcess(int32_t pid, const Process& p) {
  // Known by its exit, or by a scheduling event, only.
  const uint64_t ts = p.ts != 0 ? p.ts : p.exit_ts != 0 ? p.exit_ts : p.seen_ts;
  process_scratch_.Clear();
  trace::ProcessTree::Process* out = process_scratch_.add_processes();
  out->set_pid(pid);
  out->set_ppid(p.ppid);
  if (p.uid >= 0) out->set_uid(static_cast<int32_t>(p.uid));
  for (const std::string& arg : p.cmdline) out->add_cmdline(arg);
  SetCgroupOfProcess(p.cgroup_id, p.cgroup_path, out);
  SetPodNamesOfProcess(p.pod, out);
  const bool ended = p.exit_ts != 0;
  const uint64_t id = static_cast<uint64_t>(pid);
  if (std::optional<trace::TracePacket> labels = PodLabelsPacket(ts, *out)) {
    updates_.Put(Kind::kProcessLabels, id, ended, labels->SerializeAsString());
  }
  updates_.Put(Kind::kProcess, id, ended, ProcessTreePacket(process_scratch_, ts));
  pod_names_waiting_.Described(pid, *out, p.cgroup_path, p.exit_ts != 0, ts);
}

void DescriptorTracker::PutThread(int32_t tid, const Thread& t) {
  if (t.tgid == 0) return;  // Its process is not known yet.
  const uint64_t ts = t.ts != 0 ? t.ts : t.exit_ts != 0 ? t.exit_ts : t.seen_ts;
  thread_scratch_.Clear();
  trace::ProcessTree::Thread* out = thread_scratch_.add_threads();
  out->set_tid(tid);
  out->set_tgid(t.tgid);
  out->set_name(t.name);
  updates_.Put(Kind::kThread, static_cast<uint64_t>(tid), t.exit_ts != 0,
               ProcessTreePacket(thread_scratch_, ts));
}

int32_t DescriptorTracker::TgidOf(int32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() || it->second.tgid == 0 ? tid : it->second.tgid;
}

void DescriptorTracker::RememberExit(bool process, int32_t id, uint64_t ts) {
  exits_.push_back(Exit{process, id, ts});
  newest_exit_ts_ = std::max(newest_exit_ts_, ts);
  while (!exits_.empty() && (exits_.size() > kMaxRememberedExits ||
                             exits_.front().ts + kExitMemoryNs < newest_exit_ts_)) {
    const Exit& e = exits_.front();
    auto forget = [&e](auto& map) {
      auto it = map.find(e.id);
      if (it != map.end() && it->second.exit_ts == e.ts) map.erase(it);
    };
    if (e.process) {
      forget(processes_);
    } else {
      forget(threads_);
    }
    exits_.pop_front();
  }
}

void DescriptorTracker::Seed(const trace::TracePacket& packet) {
  absl::MutexLock lock(&mu_);
  const uint64_t ts = packet.timestamp();
  // Events already reported are kept where they are newer than the scan,
  // and a task whose exit was reported is not revived.
  for (const trace::ProcessTree::Process& p : packet.process_tree().processes()) {
    auto [it, inserted] = processes_.try_emplace(p.pid());
    Process& proc = it->second;
    if (!inserted && (proc.exit_ts != 0 || proc.ts > ts)) continue;
    proc.ppid = p.ppid();
    proc.uid = p.has_uid() ? p.uid() : -1;
    proc.cmdline.assign(p.cmdline().begin(), p.cmdline().end());
    proc.cgroup_id = p.cgroup_id();
    proc.cgroup_path = p.cgroup_path();
    proc.pod.reset();
    if (p.has_k8s_pod()) proc.pod = PodNames{p.k8s_namespace(), p.k8s_pod(), p.k8s_container()};
    proc.ts = ts;
    cgroup_paths_.Remember(proc.cgroup_id, proc.cgroup_path);
    PutProcess(p.pid(), proc);
  }
  for (const trace::ProcessTree::Thread& t : packet.process_tree().threads()) {
    auto [it, inserted] = threads_.try_emplace(t.tid());
    Thread& thread = it->second;
    if (!inserted && thread.exit_ts != 0) continue;
    if (!inserted && thread.ts > ts) {
      // A rename before the scan: the scan knows its process.
      if (thread.tgid == 0) {
        thread.tgid = t.tgid();
        PutThread(t.tid(), thread);
      }
      continue;
    }
    thread.tgid = t.tgid();
    thread.name = t.name();
    thread.ts = ts;
    PutThread(t.tid(), thread);
  }
}

void DescriptorTracker::OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid,
                               int32_t child_tid, int32_t child_tgid, std::string_view child_comm) {
  (void)parent_tid;
  absl::MutexLock lock(&mu_);
  if (child_tid == child_tgid) {
    // A new process: it starts as a copy of its parent.
    if (Process* p = EntryAt(processes_, child_tgid, ts)) {
      const uint64_t exit_ts = p->exit_ts;
      auto parent = processes_.find(parent_tgid);
      if (parent != processes_.end() && parent->first != child_tgid) {
        *p = parent->second;
      } else {
        *p = Process{};
      }
      p->ppid = parent_tgid;
      p->ts = ts;
      p->exit_ts = exit_ts;
      if (p->cmdline.empty()) p->cmdline.emplace_back(child_comm);
      PutProcess(child_tgid, *p);
    }
  }
  Thread& t = threads_[child_tid];
  if (t.exit_ts != 0 && ts > t.exit_ts) t = Thread{};
  if (ts < t.ts) {
    // Only the fork knows which process a thread renamed since belongs to.
    if (t.tgid != child_tgid) {
      t.tgid = child_tgid;
      PutThread(child_tid, t);
    }
    return;
  }
  t.tgid = child_tgid;
  t.name = std::string(child_comm);
  t.ts = ts;
  PutThread(child_tid, t);
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
  CgroupOfTask cgroup = CgroupAtExec(tid, cgroup_id);
  absl::MutexLock lock(&mu_);
  if (tgid < 0) tgid = TgidOf(tid);
  if (Process* p = EntryAt(processes_, tgid, ts)) {
    if (ppid >= 0) p->ppid = ppid;
    if (uid >= 0) p->uid = uid;
    p->ts = ts;
    // Unknown (ftrace, and the process gone): the cgroup it was seen in.
    if (cgroup.id != 0 || !cgroup.path.empty()) {
      p->cgroup_id = cgroup.id;
      p->cgroup_path = std::move(cgroup.path);
      p->pod = std::move(cgroup.pod);
    }
    p->cmdline.clear();
    for (absl::string_view arg :
         absl::StrSplit(absl::string_view(argv.data(), argv.size()), '\0', absl::SkipEmpty())) {
      p->cmdline.emplace_back(arg);
    }
    if (p->cmdline.empty()) p->cmdline.emplace_back(filename);
    PutProcess(tgid, *p);
  }
  // exec leaves one thread, named after the file.
  if (Thread* t = EntryAt(threads_, tgid, ts)) {
    t->tgid = tgid;
    t->name = comm.empty() ? Basename(filename).substr(0, 15) : std::string(comm);
    t->ts = ts;
    PutThread(tgid, *t);
  }
}

void DescriptorTracker::OnExit(uint64_t ts, int32_t tid, int32_t tgid, int group_dead,
                               std::string_view comm) {
  absl::MutexLock lock(&mu_);
  ExitLocked(ts, tid, tgid, group_dead, comm);
}

void DescriptorTracker::OnFree(uint64_t ts, int32_t tid, int32_t tgid, std::string_view comm) {
  absl::MutexLock lock(&mu_);
  // Any entry of the id stays as it is: the task's exit or last switch
  // ended it, or a fork already took the id again (the kernel frees the id
  // at the reap, the task only a grace period later).
  if (threads_.contains(tid)) return;
  ExitLocked(ts, tid, tgid, /*group_dead=*/-1, comm);
}

void DescriptorTracker::ExitLocked(uint64_t ts, int32_t tid, int32_t tgid, int group_dead,
                                   std::string_view comm) {
  if (tgid < 0) tgid = TgidOf(tid);
  // Ends the task the id names at `ts`: not a newer one already reported
  // under a reused id; a new one if the id's last task ended before.
  auto end = [ts](auto& map, int32_t id) {
    auto& e = map[id];
    if (e.exit_ts != 0 && ts > e.exit_ts) e = {};
    if (e.exit_ts != 0 || ts < e.ts) return decltype(&e){nullptr};
    e.exit_ts = ts;
    return &e;
  };
  // A task not described yet is described now, as ended. What it has no
  // time of (ts 0) any record of it read later still replaces.
  if (Thread* t = end(threads_, tid)) {
    if (t->tgid == 0) {
      t->tgid = tgid;
      if (t->name.empty()) t->name = std::string(comm);  // Else: its rename's.
      PutThread(tid, *t);
    }
    updates_.End(Kind::kThread, static_cast<uint64_t>(tid));
    RememberExit(/*process=*/false, tid, ts);
  }
  const bool process_ended = group_dead > 0 || (group_dead < 0 && tid == tgid);
  if (!process_ended) return;
  if (Process* p = end(processes_, tgid)) {
    if (p->ts == 0 && p->cmdline.empty() && !comm.empty()) {
      p->cmdline.emplace_back(comm);
      PutProcess(tgid, *p);
    }
    updates_.End(Kind::kProcess, static_cast<uint64_t>(tgid));
    updates_.End(Kind::kProcessLabels, static_cast<uint64_t>(tgid));
    pod_names_waiting_.Ended(tgid);
    RememberExit(/*process=*/true, tgid, ts);
  }
}

void DescriptorTracker::OnFinalSwitch(uint64_t ts, int32_t tid, int32_t tgid,
                                      std::string_view comm) {
  int group_dead = -1;  // Unknown: the leader's end ends its process.
  {
    absl::MutexLock lock(&mu_);
    auto it = threads_.find(tid);
    if (it != threads_.end() && it->second.exit_ts != 0) return;  // Ended already.
    if (it != threads_.end()) {
      const Thread& known = it->second;
      // Another task's: one of another process, or one before the first
      // sight of a task known only from its switches (a task's final
      // switch is its last event). Its pid was freed before it switched
      // out for good, and a fork already took it.
      if (known.tgid != 0 && tgid > 0 && known.tgid != tgid) return;
      if (known.ts == 0 && known.seen_ts > ts) return;
    }
    if (it != threads_.end() && it->second.tgid != 0) {
      // Described, and its exit not read: dropped, or still in another
      // CPU's ring (then it is not applied, being older). Left live, it
      // would stay in the store for good, pushing live tasks out when full.
      // Its process ends with it only if no other thread of it is known
      // live (a leader may exit before its threads).
      const int32_t process = it->second.tgid;
      group_dead = 1;
      for (const auto& [other_tid, other] : threads_) {
        if (other_tid != tid && other.tgid == process && other.exit_ts == 0) group_dead = 0;
      }
      if (tgid <= 0) tgid = process;
    }
  }
  OnExit(ts, tid, tgid, group_dead, comm);
}

void DescriptorTracker::OnRename(uint64_t ts, int32_t tid, std::string_view new_comm) {
  absl::MutexLock lock(&mu_);
  if (Thread* t = EntryAt(threads_, tid, ts)) {
    t->name = std::string(new_comm);
    t->ts = ts;
    PutThread(tid, *t);
  }
}

bool DescriptorTracker::OnSeen(uint64_t ts, int32_t tid, int32_t tgid, std::string_view comm) {
  if (tid <= 0 || tgid <= 0) return true;  // Nothing to describe, now or later.
  absl::MutexLock lock(&mu_);
  // An id nothing was told of, or one whose task exited more than
  // kSeenAfterExitNs before: a task is still scheduled for a moment after
  // its exit record (it wakes its parent, is preempted, switches out dead),
  // which must not describe it again as a live one; later, the id is a new
  // task's (a reused pid whose fork was not read).
  bool waiting = false;  // Left alone: its id's task exited just before.
  auto fresh = [ts, &waiting](auto& map, int32_t id) {
    auto [it, inserted] = map.try_emplace(id);
    auto& e = it->second;
    if (!inserted && !(e.exit_ts != 0 && ts > e.exit_ts + kSeenAfterExitNs)) {
      waiting |= e.exit_ts != 0;
      return decltype(&e){nullptr};
    }
    e = {};
    e.seen_ts = ts;
    return &e;
  };
  if (Thread* t = fresh(threads_, tid)) {
    t->tgid = tgid;
    t->name = std::string(comm);
    PutThread(tid, *t);
  } else if (Thread& known = threads_[tid]; known.tgid == 0 && known.exit_ts == 0) {
    known.tgid = tgid;  // Renamed before its fork was read: its name stays.
    if (known.name.empty()) known.name = std::string(comm);
    PutThread(tid, known);
  }
  if (Process* p = fresh(processes_, tgid)) {
    p->cmdline.emplace_back(comm);
    PutProcess(tgid, *p);
  }
  return !waiting;
}

void DescriptorTracker::PutInterned(uint16_t producer, uint16_t writer, uint32_t entry,
                                    std::string packet) {
  const uint64_t id = buffer::DurableStore::InternedId(producer, writer, entry);
  absl::MutexLock lock(&mu_);
  updates_.Put(Kind::kInterned, id, /*ended=*/false, std::move(packet));
}

void DescriptorTracker::EndInterned(uint16_t producer, uint16_t writer, uint32_t entry) {
  const uint64_t id = buffer::DurableStore::InternedId(producer, writer, entry);
  absl::MutexLock lock(&mu_);
  updates_.End(Kind::kInterned, id);
}

void DescriptorTracker::RefreshPodNames(uint64_t now_ns) {
  std::vector<std::pair<int32_t, std::string>> due;
  {
    absl::MutexLock lock(&mu_);
    due = pod_names_waiting_.Due(now_ns);
  }
  for (auto& [pid, path] : due) {
    std::optional<PodNames> pod = cgroup_lookup_.pod_names_of(path);
    if (!pod.has_value()) continue;
    absl::MutexLock lock(&mu_);
    auto p = processes_.find(pid);
    if (p == processes_.end() || p->second.exit_ts != 0 || p->second.cgroup_path != path ||
        p->second.pod == pod) {
      continue;
    }
    p->second.pod = std::move(pod);
    PutProcess(pid, p->second);
  }
}

size_t DescriptorTracker::pod_names_waiting_for_testing() const {
  absl::MutexLock lock(&mu_);
  return pod_names_waiting_.size();
}

void DescriptorTracker::ApplyTo(buffer::DurableStore* store) {
  DescriptorUpdates::Batch batch;
  {
    absl::MutexLock lock(&mu_);
    batch = updates_.Take();
  }
  // Outside the lock, the packets' memory freed too; and a block too large
  // to keep, as this returns.
  DescriptorUpdates::Apply(store, &batch);
  if (batch.capacity() > DescriptorUpdates::kMaxKept) return;
  absl::MutexLock lock(&mu_);
  updates_.GiveBack(std::move(batch));
}

size_t DescriptorTracker::remembered_exits_for_testing() const {
  absl::MutexLock lock(&mu_);
  return exits_.size();
}

size_t DescriptorTracker::remembered_cgroups_for_testing() const {
  absl::MutexLock lock(&mu_);
  return cgroup_paths_.size();
}

size_t DescriptorTracker::live_processes() const {
  absl::MutexLock lock(&mu_);
  size_t live = 0;
  for (const auto& [pid, p] : processes_) live += p.exit_ts == 0 ? 1 : 0;
  return live;
}

}  // namespace ringside::agent
