#ifndef RINGSIDE_BPF_LOADED_GROUPS_H_
#define RINGSIDE_BPF_LOADED_GROUPS_H_

#include <linux/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bpf/event_types.h"

struct bpf_map;
struct bpf_object;
struct bpf_program;
struct rs_all;
struct rs_sched;
struct rs_process;
struct rs_incidents;

namespace ringside::bpf {

class KernelTracepoints;

// The BPF objects of the program groups asked for — sched (bpf/sched.bpf.c),
// process (bpf/process.bpf.c) and incidents (bpf/incidents.bpf.c) — loaded:
// all three as one object (bpf/all.bpf.c), which reads the kernel's BTF
// once, or each group as its own object, so that a group this kernel
// refuses leaves the others running. Every object shares the maps of its
// Target (the rings, the drop counters, the cgroup set), which the caller
// (EventSource) owns and keeps open while this lives.
//
// Owns the objects: they are detached and destroyed with it. Not
// thread-safe.
class LoadedGroups {
 public:
  // Rodata filters, fixed at load; all off by default. A task is recorded
  // when it passes every filter that is on (sched_switch: prev or next).
  struct Filters {
    std::vector<int32_t> tgids;  // At most RS_MAX_FILTER_TGIDS.
    uint64_t cgroup_id = 0;      // cgroup v2 id: the inode number of its directory.
    // The cgroup set: when on, a task whose cgroup is in the set that
    // EventSource::SetCgroupFilter() gives passes the cgroup filter too (as
    // one whose cgroup is `cgroup_id` does). Empty until set: nothing passes.
    bool cgroup_set = false;
    int32_t max_prio = -1;  // Kernel prio (0-99 RT, 100-139 normal); -1: off.
  };
  // The groups asked for, and how they load.
  struct Request {
    bool sched = true;
    bool process = true;
    bool incidents = true;
    // sched_switch, sched_waking, sched_wakeup_new and sched_migrate_task
    // records reach the rings in per-CPU batches (up to
    // RS_SCHED_BATCH_BYTES, an eighth of a small ring), which
    // EventSource::Poll() and Drain() flush; off: each on its own.
    bool batch_sched = true;
    // With all three groups asked for, they load as one object
    // (bpf/all.bpf.c), which reads the kernel's BTF once, and each group's
    // own object only if that fails. False: the groups' own objects, as a
    // kernel that refuses one of them gets.
    bool one_object = true;
    // The one object fails to load, as on a kernel that refuses it.
    bool refuse_one_object_for_testing = false;
    // These groups fail to load, as on a kernel whose verifier refuses one
    // of their programs: their own objects, and the one object that holds
    // them.
    std::vector<Group> refuse_groups_for_testing;
    Filters filters;
    // Stacks (bpf/stack_events.h), recorded by the scheduling group:
    // RS_STACKS_* flags (0: off, and its maps take one entry each), frames
    // per stack (at most RS_STACK_MAX_DEPTH), threads waiting at once, and
    // the period below which blocks are sampled (0: every block taken).
    // `cpu_hz`: CPU samples a second per CPU (sample_cpu_stack on a
    // cpu-clock perf event, which EventSource opens); 0: none.
    struct Stacks {
      uint32_t flags = 0;
      uint32_t max_depth = 0;
      uint32_t max_blocked_tasks = 0;
      uint64_t blocked_period_ns = 0;
      // Blocked threads' stacks taken by the switch as they leave, every
      // block (a kernel without kprobes), rather than as they run again.
      bool at_switch = false;
      // On a kernel without kprobes, whether blocked threads' stacks are
      // taken at the switch (at_switch) or not at all: the switch's way
      // costs every block its stacks, too dear for a default.
      bool at_switch_allowed = true;
      uint32_t cpu_hz = 0;
    } stacks;
    // Stalls (bpf/stalls.bpf.h), measured by the scheduling group: the least
    // time in D, and waiting for a CPU, that makes a record (0: not
    // measured), and the tasks whose stalls it follows at once.
    struct Stalls {
      uint64_t blocked_ns = 0;
      uint64_t runqueue_ns = 0;
      uint32_t max_tasks = 0;
    } stalls;
  };
  // What the groups load against.
  struct Target {
    int rings_fd = -1;           // ARRAY_OF_MAPS: CPU -> ring.
    int drops_fd = -1;           // PERCPU_ARRAY: event type -> count.
    int seen_fd = -1;            // PERCPU_ARRAY: one rs_seen_counts.
    int filter_cgroups_fd = -1;  // HASH: cgroup id -> unused; the cgroup set.
    size_t ring_size = 0;        // Bytes of each CPU's ring.
    // Each program's raw_tp flavour rather than its tp_btf one (the kernel's
    // BTF is not its own: tp_btf needs that).
    bool raw_tracepoints = false;
    // The BTF CO-RE relocates against (a BtfFile's copy); empty: the
    // kernel's own.
    std::string btf_path;
  };
  // A group asked for that this kernel cannot run while others load (a
  // group whose program the verifier refuses).
  struct RefusedGroup {
    std::string group;  // "sched", "process", "incidents".
    absl::Status why;
  };
  // A loaded object, and the parts of its .bss read and written in place
  // (mapped: valid while this lives).
  struct Object {
    bpf_object* obj;
    volatile uint8_t* stopping;   // RS_EV_MAX flags.
    const __u64* outside_window;  // RS_EV_MAX counters.
  };
  // The scheduling group's, in whichever object it loaded; -1 and nulls
  // when it did not.
  struct SchedHandles {
    int flush_sched_batch_fd = -1;
    const __u64* batch_waiting = nullptr;  // RS_MAX_CPUS * 8, one line a CPU.
    bpf_map* sched_batches = nullptr;
    bpf_map* stack_losses = nullptr;       // PERCPU_ARRAY: rs_stack_loss -> count.
    bpf_map* blocked_unsampled = nullptr;  // PERCPU_ARRAY: rs_blocked_unsampled -> count.
    // The CPU sampling program, loaded when Stacks::cpu_hz asks for it.
    bpf_program* sample_cpu_stack = nullptr;
    // The kprobe that takes blocked threads' stacks as they run again,
    // loaded when Stacks::flags has RS_STACKS_BLOCKED.
    bpf_program* resume_blocked = nullptr;
    // HASH: tid -> rs_stall_task (bpf/stalls.bpf.h); one entry when stalls
    // are not measured. And the tasks that found it full.
    bpf_map* stall_tasks = nullptr;
    const __u64* stall_tasks_full = nullptr;
  };

  // Loads the groups `request` asks for into `target`'s maps, each program
  // in the flavour `kernel` has (one whose tracepoint it lacks is left out
  // and listed in skipped()): as one object when all three are asked for
  // with Request::one_object, else (or when that fails) each as its own. A
  // group whose own object does not load is left out and named in
  // refused(). Fails only when none of the groups asked for loads: with the
  // first one's error (its code says what to do, as EventSource::Load()
  // documents), and what the others said when it differs.
  static absl::StatusOr<std::unique_ptr<LoadedGroups>> Load(const Request& request,
                                                            const Target& target,
                                                            const KernelTracepoints& kernel);
  ~LoadedGroups();
  LoadedGroups(const LoadedGroups&) = delete;
  LoadedGroups& operator=(const LoadedGroups&) = delete;

  // Attaches every loaded program: the process group's first, then the
  // scheduling and incident ones. Stops at the first that fails.
  absl::Status Attach();
  // Detaches every program (a grace period each).
  void Detach();
  // Sets each loaded object's `stopping` flag (rings.bpf.h) of each type of
  // `group`: plain stores, seen by the programs at their next hit.
  void SetStopping(Group group, bool stopping);

  bool has_sched() const { return has_sched_; }
  bool has_process() const { return has_process_; }
  bool has_incidents() const { return has_incidents_; }
  // Whether the groups loaded as one object, not each as its own.
  bool one_object() const { return all_ != nullptr; }
  // Why the three groups, all asked for, did not load as one object (they
  // were then loaded each on its own: refused() says which could not);
  // empty when they did or were not tried.
  const std::string& one_object_refused() const { return one_object_refused_; }
  const std::vector<RefusedGroup>& refused() const { return refused_; }
  // "<program> (<section>)" of each program left out for want of its
  // tracepoint.
  const std::vector<std::string>& skipped() const { return skipped_; }
  // One entry per loaded object: one, or one a group.
  const std::vector<Object>& objects() const { return objects_; }
  const SchedHandles& sched() const { return sched_handles_; }
  // Bytes of records per scheduling batch; 0 when not batched (or no
  // scheduling group).
  uint32_t sched_batch_bytes() const { return sched_batch_bytes_; }

 private:
  LoadedGroups() = default;
  // Load() of the three groups as one object: true when it loaded; else
  // nothing of it is left, and one_object_refused_ says why.
  bool LoadOneObject(const Request& request, const Target& target, const KernelTracepoints& kernel);
  // Load() of each group asked for as its own object: the ones that load
  // run, the others are refused_; fails when none loads.
  absl::Status LoadEachGroup(const Request& request, const Target& target,
                             const KernelTracepoints& kernel);
  // Fills objects_ and sched_handles_ from what loaded.
  void BindObjects();

  // All three groups as one object, or each group's own; null when not
  // loaded that way.
  ::rs_all* all_ = nullptr;
  ::rs_sched* sched_ = nullptr;
  ::rs_process* process_ = nullptr;
  ::rs_incidents* incidents_ = nullptr;
  std::vector<Object> objects_;
  bool has_sched_ = false;
  bool has_process_ = false;
  bool has_incidents_ = false;
  SchedHandles sched_handles_;
  uint32_t sched_batch_bytes_ = 0;
  std::vector<std::string> skipped_;
  std::vector<RefusedGroup> refused_;
  std::string one_object_refused_;
};

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_LOADED_GROUPS_H_
