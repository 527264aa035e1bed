#ifndef RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
#define RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/descriptors/cgroup_path_cache.h"
#include "agent/descriptors/descriptor_updates.h"
#include "agent/descriptors/kubernetes_names.h"
#include "agent/descriptors/pod_names_waitlist.h"
#include "buffer/durable_store.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// Keeps a descriptor (a ProcessTree packet naming it) of every process and
// thread in the DurableStore beside a ring, so that every pid in the ring
// resolves to a name however often the ring wrapped. Seeded from a /proc
// scan, then kept up to date from fork/exec/exit/rename/free events — the
// BPF process source, or ftrace's task_newtask/sched_process_exec/exit/free
// and task_rename.
//
// A process's cgroup v2 (SetCgroupOfProcess) comes from the scan, from its
// exec (the id BPF reports, or none from ftrace; the path read from
// /proc/PID/cgroup while the process lives, and remembered per id), and
// from its parent at fork. A process that moves to another cgroup without
// an exec keeps the cgroup it had. A process in a Kubernetes pod also has
// its namespace, pod and container names (KubernetesNames), found with its
// cgroup; the kubelet may name a container only after its first process
// started, so names not known yet are looked up again (RefreshPodNames,
// PodNamesWaitlist).
//
// Records are read CPU by CPU, so a task's events come in any order: an
// exec may come before its fork or after a later exec (exec moves tasks
// between CPUs), a rename before the fork of its thread, the fork of a
// short-lived task after its exit. Every description carries the time of
// its event, and an event older than what is already known of the task is
// not applied. A task that exited is remembered (kMaxRememberedExits, for
// kExitMemoryNs): its late events still describe it, as ended, and only an
// event after its exit starts a new task under its id (a reused pid).
//
// Thread-safe: data source threads report events; the updates wait in a
// queue until the buffer's owner applies them (ApplyTo), as the store, like
// the ring, has a single owner.
class DescriptorTracker {
 public:
  // How a process's cgroup is found (cgroup_fs.h's functions; tests fake
  // them): its path by pid, the id of a path.
  struct CgroupLookup {
    std::function<std::optional<std::string>(int32_t pid)> path_of_pid;
    std::function<std::optional<uint64_t>(const std::string& path)> id_of_path;
    // The Kubernetes names of a cgroup's pod and container; by default the
    // node's (PodNamesOfCgroup with NodeKubernetesNames()).
    std::function<std::optional<PodNames>(const std::string& path)> pod_names_of;
  };
  // Paths of this many cgroup ids are remembered (a bounded cache: a
  // forgotten one is read from /proc again).
  static constexpr size_t kMaxRememberedCgroups = 4096;
  // Tasks that exited are remembered, for late records of them, this many
  // (the oldest forgotten first) and for this long after the newest exit.
  static constexpr size_t kMaxRememberedExits = 16384;
  static constexpr uint64_t kExitMemoryNs = 30'000'000'000;

  DescriptorTracker();
  explicit DescriptorTracker(CgroupLookup lookup);

  // Everything in a ProcessTree packet (a /proc scan taken after the
  // sources started), except tasks whose exit was already reported.
  void Seed(const trace::TracePacket& process_tree);

  // A fork does not undo what a later event said of the child.
  void OnFork(uint64_t ts, int32_t parent_tid, int32_t parent_tgid, int32_t child_tid,
              int32_t child_tgid, std::string_view child_comm);
  // ftrace's task_newtask: the parent is the current task; a thread when
  // clone_flags has CLONE_THREAD.
  void OnNewTask(uint64_t ts, int32_t parent_tid, int32_t child_tid, std::string_view comm,
                 uint64_t clone_flags);
  // `argv`: NUL-separated arguments (may be empty: then the filename).
  // `tgid`/`ppid`/`uid` < 0: unknown (ftrace), taken from what is known.
  // `cgroup_id`: the task's cgroup v2 id at exec (BPF); 0: unknown (ftrace),
  // then found from its path. Reads /proc/<tid>/cgroup unless the id's path
  // is remembered; a process already gone keeps its id alone.
  void OnExec(uint64_t ts, int32_t tid, int32_t tgid, std::string_view filename,
              std::string_view argv, std::string_view comm, int32_t ppid, int64_t uid,
              uint64_t cgroup_id = 0);
  // `group_dead` < 0: unknown; then the leader's exit ends the process.
  // A task nothing was read of yet (born before the sources ran and gone
  // before the scan, or its fork still unread) is named by its `comm`.
  void OnExit(uint64_t ts, int32_t tid, int32_t tgid, int group_dead, std::string_view comm = {});
  // A task's last switch, after its exit (sched_switch's prev_state X or
  // Z). A task nothing was read of is named by it, as ended: one that was
  // exiting when recording began, its exit not recorded (a wakeup of its
  // parent on its way out would otherwise name a task nobody describes).
  // A described task whose exit was not read is ended by it (its process
  // too, unless another thread of it is live). A final switch that cannot
  // be the described task's, being of another process (`tgid` > 0) or
  // older than the switch that first showed a task known only from its
  // switches, is of an earlier task under a reused id: it ends nothing.
  void OnFinalSwitch(uint64_t ts, int32_t tid, int32_t tgid, std::string_view comm);
  // A task freed (sched_process_free), after its exit and its last switch.
  // Names a task nothing was read of, as ended: one whose exit came before
  // recording began (the importer makes a thread of every freed id). Never
  // ends or changes a task the tracker has an entry of: the id is free from
  // the reap on, so it may be a new task's by the time its old task is
  // freed. `tgid` < 0: unknown.
  void OnFree(uint64_t ts, int32_t tid, int32_t tgid, std::string_view comm);
  // A thread whose fork is not yet known is described once it is (or at
  // its exit): until then its process is unknown.
  void OnRename(uint64_t ts, int32_t tid, std::string_view new_comm);
  // A task a scheduling event at `ts` names (a switch's tasks, a wakeup's,
  // a migration's), thread `tid` of process `tgid` named `comm`. If nothing
  // was told of it yet, it is described now from that name (the process's
  // command line its comm), so that its events never reach the ring before
  // a descriptor of it reaches the store: its fork may still be unread in
  // another CPU's ring (records are read CPU by CPU), or unrecorded (a task
  // that moved into a cgroup the recording is filtered to). Anything read
  // of it later, fork, exec, rename, exit, its final switch, replaces or
  // ends this description, which has no time of its own (ts 0). An id
  // whose task exited is left alone for kSeenAfterExitNs (that task is
  // still scheduled for a moment); after that it is a new task's.
  // Returns false when it left the id alone for that reason: a caller that
  // tells each task once must tell this one again at its next event, or a
  // new task under a pid reused within the second (its fork unread) is
  // never described.
  bool OnSeen(uint64_t ts, int32_t tid, int32_t tgid, std::string_view comm);
  static constexpr uint64_t kSeenAfterExitNs = 1'000'000'000;

  // Interned data of a packet sequence (a stack writer's callstacks,
  // frames, names): `packet`, a TracePacket of interned_data, goes into the
  // store as entry `entry` of sequence {producer, writer}
  // (DurableStore::InternedId) with the descriptors, so
  // that every file and snapshot resolves the samples that refer to it
  // however often the ring wrapped. Queued like them: a packet written into
  // a chunk after this call reaches the ring no earlier than this reaches
  // the store (SessionBuffers::CommitQueued applies both under one lock).
  void PutInterned(uint16_t producer, uint16_t writer, uint32_t entry, std::string packet);
  // The entry is no longer referred to by new samples: it stays while the
  // ring may hold samples that do (DurableStore::MarkEnded).
  void EndInterned(uint16_t producer, uint16_t writer, uint32_t entry);

  // Looks up again the names of the processes of pods that lacked them
  // (their pod or container not known to the node yet), and describes
  // those found anew. Reads the node's files: call it outside any lock a
  // hot path needs (the buffer owner does, before ApplyTo). `now_ns`:
  // CLOCK_BOOTTIME, the clock of the events' times.
  void RefreshPodNames(uint64_t now_ns) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves the updates reported so far into `store` (the buffer owner's).
  void ApplyTo(buffer::DurableStore* store);
  size_t live_processes() const;
  size_t remembered_cgroups_for_testing() const;
  size_t remembered_exits_for_testing() const;
  size_t pod_names_waiting_for_testing() const;

 private:
  struct Process {
    int32_t ppid = 0;
    int64_t uid = -1;
    std::vector<std::string> cmdline;
    uint64_t cgroup_id = 0;       // 0: unknown.
    std::string cgroup_path;      // Empty: unknown.
    uint64_t ts = 0;              // Of the event (or scan) that last described it.
    uint64_t exit_ts = 0;         // 0: alive.
    uint64_t seen_ts = 0;         // Described by OnSeen only: the event's time.
    std::optional<PodNames> pod;  // Unset: not in a pod, or not known yet.
  };
  struct Thread {
    int32_t tgid = 0;  // 0: unknown (a rename read before the fork).
    std::string name;
    uint64_t ts = 0;
    uint64_t exit_ts = 0;  // 0: alive.
    uint64_t seen_ts = 0;  // Described by OnSeen only: the event's time.
  };
  // The entry of `id` an event at `ts` describes: a new one for an id not
  // known or whose task exited before `ts`; null when a later event
  // already described it.
  template <typename Entry>
  static Entry* EntryAt(absl::node_hash_map<int32_t, Entry>& map, int32_t id, uint64_t ts);
  // Queue the entry's descriptor for the store (as ended, if it is).
  void PutProcess(int32_t pid, const Process& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutThread(int32_t tid, const Thread& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t TgidOf(int32_t tid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers an exit, and forgets the exits past kMaxRememberedExits or
  // kExitMemoryNs.
  void RememberExit(bool process, int32_t id, uint64_t ts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OnExit() under the lock.
  void ExitLocked(uint64_t ts, int32_t tid, int32_t tgid, int group_dead, std::string_view comm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cgroup of `tid` at its exec, `cgroup_id` as reported (0: unknown),
  // and the names of its pod. Takes mu_ only to read and update the
  // remembered paths: /proc and the node's pods are read without it.
  struct CgroupOfTask {
    uint64_t id = 0;
    std::string path;  // Empty: unknown.
    std::optional<PodNames> pod;
  };
  CgroupOfTask CgroupAtExec(int32_t tid, uint64_t cgroup_id) ABSL_LOCKS_EXCLUDED(mu_);

  CgroupLookup cgroup_lookup_;  // Set once, in the constructor.
  mutable absl::Mutex mu_;
  CgroupPathCache cgroup_paths_ ABSL_GUARDED_BY(mu_){kMaxRememberedCgroups};
  DescriptorUpdates updates_ ABSL_GUARDED_BY(mu_);
  // Live tasks, and the ones that exited while remembered. Nodes, not
  // flat slots: the tables grow with every new pid until exits are
  // forgotten (up to kMaxRememberedExits), and growing a flat table moved
  // every entry (~220 bytes a process) into fresh pages: a fifth of the BPF
  // reader's profile in a loop of fork+exec. A node table moves pointers,
  // and its nodes reuse the memory of those forgotten: the agent's RSS grew
  // 10.0 MiB over 15,000 processes instead of 14.1-14.4 (empty slots, and
  // the peaks of moving into a table twice the size).
  absl::node_hash_map<int32_t, Process> processes_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<int32_t, Thread> threads_ ABSL_GUARDED_BY(mu_);
  struct Exit {
    bool process;
    int32_t id;
    uint64_t ts;
  };
  std::deque<Exit> exits_ ABSL_GUARDED_BY(mu_);  // Oldest first.
  PodNamesWaitlist pod_names_waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t newest_exit_ts_ ABSL_GUARDED_BY(mu_) = 0;
  // What PutProcess() and PutThread() fill, cleared and filled again for
  // each descriptor: a cleared message keeps its nested messages and its
  // strings' memory. Built afresh, the packet, its tree, its entry and each
  // string were allocations and frees: BM_ForkExecLoop's tell_ns went from
  // 1.75 to 1.08 us a process without them (issue 57).
  trace::ProcessTree process_scratch_ ABSL_GUARDED_BY(mu_);
  trace::ProcessTree thread_scratch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DESCRIPTORS_DESCRIPTOR_TRACKER_H_
