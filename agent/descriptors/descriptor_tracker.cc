#include "agent/descriptors/descriptor_tracker.h"

#include "absl/strings/str_split.h"

namespace ringside::agent {
namespace {

using Kind = buffer::DurableStore::Kind;
constexpr uint64_t kCloneThread = 0x00010000;  // CLONE_THREAD

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

void DescriptorTracker::PutProcess(uint64_t ts, int32_t pid, const Process& p) {
  trace::TracePacket packet;
  packet.set_timestamp(ts);
  trace::ProcessTree::Process* out = packet.mutable_process_tree()->add_processes();
  out->set_pid(pid);
  out->set_ppid(p.ppid);
  if (p.uid >= 0) out->set_uid(static_cast<int32_t>(p.uid));
  for (const std::string& arg : p.cmdline) out->add_cmdline(arg);
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
    PutProcess(ts, p.pid(), proc);
  }
  for (const trace::ProcessTree::Thread& t : packet.process_tree().threads()) {
    if (ended_before_seed_.count(t.tid())) continue;
    Thread& thread = threads_[t.tid()];
    thread.tgid = t.tgid();
    thread.name = t.name();
    PutThread(ts, t.tid(), thread);
  }
  seeded_ = true;
  ended_before_seed_.clear();
}

void DescriptorTracker::OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid,
                               int32_t child_tid, int32_t child_tgid, std::string_view child_comm) {
  absl::MutexLock lock(&mu_);
  if (child_tid == child_tgid) {
    // A new process: it starts as a copy of its parent.
    Process p;
    auto parent = processes_.find(parent_tgid);
    if (parent != processes_.end()) p = parent->second;
    p.ppid = parent_tgid;
    if (p.cmdline.empty()) p.cmdline.emplace_back(child_comm);
    processes_[child_tgid] = p;
    PutProcess(ts, child_tgid, p);
  }
  (void)parent_tid;
  Thread t{child_tgid, std::string(child_comm)};
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
                               int64_t uid) {
  absl::MutexLock lock(&mu_);
  if (tgid < 0) tgid = TgidOf(tid);
  Process& p = processes_[tgid];
  if (ppid >= 0) p.ppid = ppid;
  if (uid >= 0) p.uid = uid;
  p.cmdline.clear();
  for (absl::string_view arg :
       absl::StrSplit(absl::string_view(argv.data(), argv.size()), '\0', absl::SkipEmpty())) {
    p.cmdline.emplace_back(arg);
  }
  if (p.cmdline.empty()) p.cmdline.emplace_back(filename);
  PutProcess(ts, tgid, p);
  // exec leaves one thread, named after the file.
  Thread t{tgid, comm.empty() ? Basename(filename).substr(0, 15) : std::string(comm)};
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

size_t DescriptorTracker::live_processes() const {
  absl::MutexLock lock(&mu_);
  return processes_.size();
}

}  // namespace ringside::agent
