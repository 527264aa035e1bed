#include "bpf/loaded_groups.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "all.skel.h"
#include "bpf/kernel_tracepoints.h"
#include "bpf/load_errors.h"
#include "bpf/sched_events.h"
#include "bpf/stack_events.h"
#include "bpf/task_state.h"
#include "bpf/task_state_rules.h"
#include "incidents.skel.h"
#include "process.skel.h"
#include "sched.skel.h"

namespace ringside::bpf {
namespace {

// Opens a group's object, CO-RE relocated against `btf_path` when set (a
// BtfFile's copy).
template <typename Skel>
Skel* OpenGroup(Skel* (*open)(const bpf_object_open_opts*), const std::string& btf_path) {
  LIBBPF_OPTS(bpf_object_open_opts, opts);
  if (!btf_path.empty()) opts.btf_custom_path = btf_path.c_str();
  return open(&opts);
}

// What loading a group's object takes besides the object.
struct GroupSetup {
  const LoadedGroups::Request& request;
  const LoadedGroups::Target& target;
  const KernelTracepoints& kernel;
};

// Fills a group's rodata, shares the maps into it, and picks the programs
// that load (each program that cannot, for want of its tracepoint, is
// listed in `skipped`).
template <typename Skel>
absl::Status PrepareGroup(Skel* skel, const GroupSetup& setup, std::vector<std::string>* skipped) {
  const LoadedGroups::Filters& f = setup.request.filters;
  skel->rodata->filter_num_tgids = static_cast<uint32_t>(f.tgids.size());
  for (size_t i = 0; i < f.tgids.size(); i++) skel->rodata->filter_tgids[i] = f.tgids[i];
  skel->rodata->filter_cgroup_id = f.cgroup_id;
  skel->rodata->filter_cgroup_set = f.cgroup_set;
  skel->rodata->filter_max_prio = f.max_prio;
  skel->rodata->ring_wakeup_bytes = setup.target.ring_size / 4;
  if (bpf_map__reuse_fd(skel->maps.rings, setup.target.rings_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.drops, setup.target.drops_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.seen, setup.target.seen_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.filter_cgroups, setup.target.filter_cgroups_fd) != 0) {
    return LoadError(errno, "sharing the rings between the BPF objects");
  }
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) {
    const absl::string_view section = bpf_program__section_name(prog);
    if (section == "raw_tp") {  // Run by user space (BPF_PROG_TEST_RUN), never attached.
      bpf_program__set_autoattach(prog, false);
      continue;
    }
    if (section == "perf_event") {  // Attached to perf events by EventSource, if at all.
      bpf_program__set_autoattach(prog, false);
      bpf_program__set_autoload(prog,
                                setup.request.stacks.flags != 0 && setup.request.stacks.cpu_hz > 0);
      continue;
    }
    if (section == "kprobe") {  // Attached where StackMaps finds it a place.
      bpf_program__set_autoattach(prog, false);
      bpf_program__set_autoload(prog, (setup.request.stacks.flags & RS_STACKS_BLOCKED) != 0 &&
                                          !setup.request.stacks.at_switch);
      continue;
    }
    // Each program is there as tp_btf and as raw_tp (named _raw): one of
    // the two loads.
    const bool raw = absl::StartsWith(section, "raw_tp/");
    if (raw != setup.target.raw_tracepoints) {
      bpf_program__set_autoload(prog, false);
      continue;
    }
    absl::string_view tracepoint = section.substr(section.find('/') + 1);
    absl::string_view name = bpf_program__name(prog);
    if (raw) name = absl::StripSuffix(name, "_raw");
    bool load = setup.kernel.Has(tracepoint);
    if (!load) skipped->push_back(absl::StrCat(bpf_program__name(prog), " (", section, ")"));
    // Two flavours of oom/mark_victim: (task, uid) since 6.8, (pid) before.
    if (tracepoint == "mark_victim" && load) {
      const bool task_flavour = setup.kernel.FirstArgIsPointer(tracepoint);
      load = task_flavour == (name == "handle_mark_victim");
    }
    // Two of sched_switch: with its prev_state argument since 5.18, and
    // (preempt, prev, next) before.
    if (tracepoint == "sched_switch" && load) {
      const bool with_state = setup.kernel.NumArgs(tracepoint) >= 4;
      load = with_state == (name == "handle_sched_switch");
    }
    bpf_program__set_autoload(prog, load);
  }
  return absl::OkStatus();
}

// The scheduling programs' own rodata (in bpf/sched.bpf.c and in
// bpf/all.bpf.c); the batch size they were given is returned.
template <typename Skel>
uint32_t PrepareSched(Skel* skel, size_t ring_size, bool batch_sched,
                      const LoadedGroups::Request::Stacks& stacks,
                      const LoadedGroups::Request::Stalls& stalls) {
  skel->rodata->stall_blocked_ns = stalls.blocked_ns;
  skel->rodata->stall_runqueue_ns = stalls.runqueue_ns;
  // Only blocks need the maps: run-queue delays are the kernel's own.
  const uint32_t tasks = stalls.blocked_ns != 0 ? std::max<uint32_t>(stalls.max_tasks, 1) : 1;
  bpf_map__set_max_entries(skel->maps.stall_tasks, tasks);
  skel->rodata->stack_flags = stacks.flags;
  skel->rodata->stack_bytes =
      std::clamp<uint32_t>(stacks.max_depth, 1, RS_STACK_MAX_DEPTH) * sizeof(uint64_t);
  skel->rodata->blocked_period_ns = stacks.blocked_period_ns;
  skel->rodata->stacks_at_switch = stacks.at_switch;
  const bool blocked = (stacks.flags & RS_STACKS_BLOCKED) != 0;
  // Taken at the switch, a blocked thread's stacks wait with it.
  bpf_map__set_value_size(
      skel->maps.blocked_tasks,
      sizeof(rs_stack_blocked) + (blocked && stacks.at_switch ? 2 * skel->rodata->stack_bytes : 0));
  bpf_map__set_max_entries(skel->maps.blocked_tasks,
                           blocked ? std::max<uint32_t>(stacks.max_blocked_tasks, 1) : 1);
  utsname u;
  skel->rodata->task_state_rules =
      uname(&u) == 0 ? TaskStateRulesForRelease(u.release) : RS_TASK_STATE_RULES_NEWEST;
  // A batch is at most an eighth of the ring, so a full ring still takes
  // most of them; fewer than 4 switches a batch saves too little.
  const size_t fit = ring_size / 8 / sizeof(rs_sched_switch) * sizeof(rs_sched_switch);
  const uint32_t bytes = batch_sched && fit >= 4 * sizeof(rs_sched_switch)
                             ? static_cast<uint32_t>(std::min<size_t>(fit, RS_SCHED_BATCH_BYTES))
                             : 0;
  skel->rodata->sched_batch_bytes = bytes;
  return bytes;
}

// A group's own object: opened into `*skel` (left to the caller to destroy
// on failure), prepared, handed to `configure` and loaded. `name` is its
// source's: "sched" for bpf/sched.
template <typename Skel, typename Configure>
absl::Status LoadOwnObject(const char* name, Skel** skel,
                           Skel* (*open)(const bpf_object_open_opts*), int (*load)(Skel*),
                           const GroupSetup& setup, std::vector<std::string>* skipped,
                           Configure configure) {
  if ((*skel = OpenGroup(open, setup.target.btf_path)) == nullptr) {
    const int err = errno;
    return LoadError(err, absl::StrCat("opening bpf/", name));
  }
  if (absl::Status st = PrepareGroup(*skel, setup, skipped); !st.ok()) return st;
  configure(*skel);
  if (const int err = load(*skel); err != 0) {
    return LoadError(-err, absl::StrCat("loading bpf/", name));
  }
  return absl::OkStatus();
}

bool RefusedForTesting(const LoadedGroups::Request& request, Group group) {
  const std::vector<Group>& refused = request.refuse_groups_for_testing;
  return std::find(refused.begin(), refused.end(), group) != refused.end();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedGroups>> LoadedGroups::Load(const Request& request,
                                                                 const Target& target,
                                                                 const KernelTracepoints& kernel) {
  std::unique_ptr<LoadedGroups> groups(new LoadedGroups());
  if (request.sched && request.process && request.incidents && request.one_object &&
      groups->LoadOneObject(request, target, kernel)) {
    return groups;
  }
  if (absl::Status st = groups->LoadEachGroup(request, target, kernel); !st.ok()) return st;
  return groups;
}

bool LoadedGroups::LoadOneObject(const Request& request, const Target& target,
                                 const KernelTracepoints& kernel) {
  const GroupSetup setup{request, target, kernel};
  // All three as one object: one read of the kernel's BTF. A failure
  // (one group's program refused) is not reported, nor its verifier log
  // written (LoadError): the groups' own objects say which group it was,
  // and load the others.
  std::vector<std::string> skipped;
  const bool loaded = [&] {
    if ((all_ = OpenGroup(rs_all__open_opts, target.btf_path)) == nullptr) {
      one_object_refused_ = LoadFailureSummary(errno);
      return false;
    }
    if (absl::Status st = PrepareGroup(all_, setup, &skipped); !st.ok()) {
      one_object_refused_ = std::string(st.message());
      return false;
    }
    sched_batch_bytes_ =
        PrepareSched(all_, target.ring_size, request.batch_sched, request.stacks, request.stalls);
    if (request.refuse_one_object_for_testing || !request.refuse_groups_for_testing.empty()) {
      one_object_refused_ = "refused for testing";
      return false;
    }
    const int err = rs_all__load(all_);
    if (err != 0) one_object_refused_ = LoadFailureSummary(-err);
    return err == 0;
  }();
  if (loaded) {
    skipped_ = std::move(skipped);
    BindObjects();
    return true;
  }
  if (all_ != nullptr) rs_all__destroy(all_);
  all_ = nullptr;
  sched_batch_bytes_ = 0;
  CaptureLibbpfLog();  // The groups' errors are read from their own logs.
  return false;
}

absl::Status LoadedGroups::LoadEachGroup(const Request& request, const Target& target,
                                         const KernelTracepoints& kernel) {
  const GroupSetup setup{request, target, kernel};
  // Each group loads on its own: one this kernel cannot run (a program its
  // verifier refuses) leaves the others running, with ftrace's fallback
  // events in its place. Load() fails only when no group it was asked for
  // loads.
  std::vector<RefusedGroup> refused;
  int requested = 0;
  // On failure the group is refused and destroyed, and its skipped
  // programs are not listed.
  auto attempt = [&](Group group, const char* name, auto** skel, auto open, auto load, auto destroy,
                     auto configure) {
    requested++;
    std::vector<std::string> skipped;
    absl::Status st = RefusedForTesting(request, group)
                          ? absl::InvalidArgumentError(
                                absl::StrCat("loading bpf/", name, ": refused for testing"))
                          : LoadOwnObject(name, skel, open, load, setup, &skipped, configure);
    if (st.ok()) {
      skipped_.insert(skipped_.end(), skipped.begin(), skipped.end());
      return;
    }
    if (*skel != nullptr) destroy(*skel);
    *skel = nullptr;
    refused.push_back({name, std::move(st)});
  };
  auto nothing_more = [](auto*) {};
  if (request.sched) {
    attempt(Group::kSched, "sched", &sched_, rs_sched__open_opts, rs_sched__load, rs_sched__destroy,
            [&](::rs_sched* skel) {
              sched_batch_bytes_ = PrepareSched(skel, target.ring_size, request.batch_sched,
                                                request.stacks, request.stalls);
            });
    if (sched_ == nullptr) sched_batch_bytes_ = 0;
  }
  if (request.process) {
    attempt(Group::kProcess, "process", &process_, rs_process__open_opts, rs_process__load,
            rs_process__destroy, nothing_more);
  }
  if (request.incidents) {
    attempt(Group::kIncidents, "incidents", &incidents_, rs_incidents__open_opts,
            rs_incidents__load, rs_incidents__destroy, nothing_more);
  }
  if (requested > 0 && refused.size() == static_cast<size_t>(requested)) {
    // Nothing loads: the first group's error (its code says what to do),
    // and what the others said when it differs.
    std::string message(refused.front().why.message());
    for (size_t k = 1; k < refused.size(); k++) {
      if (refused[k].why.message() != refused.front().why.message()) {
        absl::StrAppend(&message, "; ", refused[k].why.message());
      }
    }
    return absl::Status(refused.front().why.code(), message);
  }
  refused_ = std::move(refused);
  BindObjects();
  return absl::OkStatus();
}

void LoadedGroups::BindObjects() {
  auto bind = [&](bpf_object* obj, auto* bss) {
    objects_.push_back({obj, bss->stopping, bss->outside_window});
  };
  // The scheduling group's handles, in whichever object it loaded.
  auto bind_sched = [&](auto* skel) {
    has_sched_ = true;
    sched_handles_.flush_sched_batch_fd = bpf_program__fd(skel->progs.flush_sched_batch);
    sched_handles_.batch_waiting = skel->bss->batch_waiting;
    sched_handles_.sched_batches = skel->maps.sched_batches;
    sched_handles_.stack_losses = skel->maps.stack_losses;
    sched_handles_.blocked_unsampled = skel->maps.blocked_unsampled;
    sched_handles_.stall_tasks = skel->maps.stall_tasks;
    sched_handles_.stall_tasks_full = &skel->bss->stall_tasks_full;
    if (bpf_program__autoload(skel->progs.sample_cpu_stack)) {
      sched_handles_.sample_cpu_stack = skel->progs.sample_cpu_stack;
    }
    if (bpf_program__autoload(skel->progs.resume_blocked)) {
      sched_handles_.resume_blocked = skel->progs.resume_blocked;
    }
  };
  if (all_ != nullptr) {
    bind(all_->obj, all_->bss);
    bind_sched(all_);
    has_process_ = has_incidents_ = true;
    return;
  }
  if (sched_ != nullptr) {
    bind(sched_->obj, sched_->bss);
    bind_sched(sched_);
  }
  if (process_ != nullptr) {
    bind(process_->obj, process_->bss);
    has_process_ = true;
  }
  if (incidents_ != nullptr) {
    bind(incidents_->obj, incidents_->bss);
    has_incidents_ = true;
  }
}

LoadedGroups::~LoadedGroups() {
  if (all_ != nullptr) rs_all__destroy(all_);
  if (sched_ != nullptr) rs_sched__destroy(sched_);
  if (process_ != nullptr) rs_process__destroy(process_);
  if (incidents_ != nullptr) rs_incidents__destroy(incidents_);
}

absl::Status LoadedGroups::Attach() {
  if (all_ != nullptr) {
    if (int err = rs_all__attach(all_); err != 0) return LoadError(-err, "attaching bpf/all");
  }
  if (process_ != nullptr) {
    if (int err = rs_process__attach(process_); err != 0) {
      return LoadError(-err, "attaching bpf/process");
    }
  }
  if (sched_ != nullptr) {
    if (int err = rs_sched__attach(sched_); err != 0) {
      return LoadError(-err, "attaching bpf/sched");
    }
  }
  if (incidents_ != nullptr) {
    if (int err = rs_incidents__attach(incidents_); err != 0) {
      return LoadError(-err, "attaching bpf/incidents");
    }
  }
  return absl::OkStatus();
}

void LoadedGroups::Detach() {
  if (all_ != nullptr) rs_all__detach(all_);
  if (sched_ != nullptr) rs_sched__detach(sched_);
  if (process_ != nullptr) rs_process__detach(process_);
  if (incidents_ != nullptr) rs_incidents__detach(incidents_);
}

void LoadedGroups::SetStopping(Group group, bool stopping) {
  // The groups' flags change in the order EventSource::SetRecording gives
  // (process records first on, last off): a release fence keeps this
  // group's stores from becoming visible to the programs before an earlier
  // call's. x86 keeps stores in order anyway; arm64 may not, and the
  // flags live in different maps.
  std::atomic_thread_fence(std::memory_order_release);
  for (const EventType& e : kEventTypes) {
    if (e.group != group) continue;
    for (const Object& o : objects_) o.stopping[e.type] = stopping ? 1 : 0;
  }
}

}  // namespace ringside::bpf
