#include "bpf/event_source.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "all.skel.h"
#include "bpf/btf_file.h"
#include "bpf/common_events.h"
#include "bpf/kernel_tracepoints.h"
#include "bpf/load_errors.h"
#include "bpf/sched_events.h"
#include "bpf/task_state.h"
#include "bpf/task_state_rules.h"
#include "incidents.skel.h"
#include "process.skel.h"
#include "sched.skel.h"

namespace ringside::bpf {
namespace {

// Load steps every program group shares: the same ring and drop maps, the
// filters, and leaving out programs the kernel cannot attach.
struct SharedMaps {
  int rings_fd;
  int drops_fd;
  int filter_cgroups_fd;
};

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
  const EventSource::Options& options;
  SharedMaps maps;
  size_t ring_size;
  const KernelTracepoints& kernel;
  bool raw_tracepoints;
  std::string btf_path;  // Empty: the kernel's own BTF.
};

// Fills a group's rodata, shares the maps into it, and picks the programs
// that load (each program that cannot, for want of its tracepoint, is
// listed in `skipped`).
template <typename Skel>
absl::Status PrepareGroup(Skel* skel, const GroupSetup& setup, std::vector<std::string>* skipped) {
  const EventSource::Filters& f = setup.options.filters;
  skel->rodata->filter_num_tgids = static_cast<uint32_t>(f.tgids.size());
  for (size_t i = 0; i < f.tgids.size(); i++) skel->rodata->filter_tgids[i] = f.tgids[i];
  skel->rodata->filter_cgroup_id = f.cgroup_id;
  skel->rodata->filter_cgroup_set = f.cgroup_set;
  skel->rodata->filter_max_prio = f.max_prio;
  skel->rodata->ring_wakeup_bytes = setup.ring_size / 4;
  if (bpf_map__reuse_fd(skel->maps.rings, setup.maps.rings_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.drops, setup.maps.drops_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.filter_cgroups, setup.maps.filter_cgroups_fd) != 0) {
    return LoadError(errno, "sharing the rings between the BPF objects");
  }
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) {
    const absl::string_view section = bpf_program__section_name(prog);
    if (section == "raw_tp") {  // Run by user space (BPF_PROG_TEST_RUN), never attached.
      bpf_program__set_autoattach(prog, false);
      continue;
    }
    // Each program is there as tp_btf and as raw_tp (named _raw): one of
    // the two loads.
    const bool raw = absl::StartsWith(section, "raw_tp/");
    if (raw != setup.raw_tracepoints) {
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
uint32_t PrepareSched(Skel* skel, size_t ring_size, bool batch_sched) {
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
  if ((*skel = OpenGroup(open, setup.btf_path)) == nullptr) {
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

}  // namespace

absl::StatusOr<std::unique_ptr<EventSource>> EventSource::Load(const Options& options) {
  struct stat st;
  const bool kernel_btf = stat("/sys/kernel/btf/vmlinux", &st) == 0;
  if (!kernel_btf && options.btf_path.empty()) {
    return absl::UnavailableError(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE BPF programs cannot load "
        "without the kernel's BTF as a file (bpf_config.btf_path); the ftrace sources record "
        "instead");
  }
  // A kernel's own BTF is always right: a fleet's config may name a file
  // that only its machines without BTF have.
  Options effective = options;
  if (kernel_btf) effective.btf_path.clear();
  // Read and checked once, here, so that a wrong file is named as the
  // config's, not as a failure to load; libbpf reads the checked copy.
  std::unique_ptr<BtfFile> btf_file;
  if (!effective.btf_path.empty()) {
    absl::StatusOr<std::unique_ptr<BtfFile>> opened = BtfFile::Open(effective.btf_path);
    if (!opened.ok()) return opened.status();
    btf_file = std::move(*opened);
  }
  if (options.filters.tgids.size() > RS_MAX_FILTER_TGIDS) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", RS_MAX_FILTER_TGIDS,
                                                   " tgids can be filtered on, not ",
                                                   options.filters.tgids.size()));
  }
  CaptureLibbpfLog();
  std::unique_ptr<EventSource> s(new EventSource());
  s->num_cpus_ = libbpf_num_possible_cpus();
  if (s->num_cpus_ <= 0 || s->num_cpus_ > RS_MAX_CPUS) {
    return absl::UnavailableError(absl::StrCat("unsupported CPU count ", s->num_cpus_));
  }
  // Ring size: a power of two number of pages.
  s->ring_size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (s->ring_size_ < options.ring_size_per_cpu) s->ring_size_ <<= 1;
  const uint32_t ring_size = static_cast<uint32_t>(s->ring_size_);

  // The maps every program shares. The outer array's inner-map template
  // fixes the ring size the programs are verified against.
  const int template_fd =
      bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring_tmpl", 0, 0, ring_size, nullptr);
  if (template_fd < 0) return LoadError(errno, "creating a BPF ring buffer");
  LIBBPF_OPTS(bpf_map_create_opts, outer_opts, .inner_map_fd = static_cast<__u32>(template_fd));
  s->rings_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "rs_rings", sizeof(uint32_t),
                                sizeof(uint32_t), static_cast<uint32_t>(s->num_cpus_), &outer_opts);
  const int outer_errno = errno;
  close(template_fd);
  if (s->rings_fd_ < 0) return LoadError(outer_errno, "creating the per-CPU ring array");
  s->drops_fd_ = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "rs_drops", sizeof(uint32_t),
                                sizeof(uint64_t), RS_EV_MAX, nullptr);
  if (s->drops_fd_ < 0) return LoadError(errno, "creating the drop counters");
  s->filter_cgroups_fd_ = bpf_map_create(BPF_MAP_TYPE_HASH, "rs_filter_cg", sizeof(uint64_t),
                                         sizeof(uint8_t), RS_MAX_FILTER_CGROUPS, nullptr);
  if (s->filter_cgroups_fd_ < 0) return LoadError(errno, "creating the cgroup filter");
  for (int cpu = 0; cpu < s->num_cpus_; cpu++) {
    const int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring", 0, 0, ring_size, nullptr);
    if (fd < 0) return LoadError(errno, absl::StrCat("creating the ring of CPU ", cpu));
    s->ring_fds_.push_back(fd);
    const uint32_t key = static_cast<uint32_t>(cpu);
    if (bpf_map_update_elem(s->rings_fd_, &key, &fd, BPF_ANY) != 0) {
      return LoadError(errno, absl::StrCat("installing the ring of CPU ", cpu));
    }
  }
  absl::StatusOr<std::unique_ptr<RingReader>> reader =
      RingReader::Create(s->ring_fds_, s->ring_size_);
  if (!reader.ok()) return reader.status();
  s->reader_ = std::move(*reader);
  s->raw_tracepoints_ = !kernel_btf;
  // The copy is needed until the objects are loaded (libbpf relocates at
  // load), not after.
  if (absl::Status st = s->LoadGroups(effective, btf_file.get()); !st.ok()) return st;
  return s;
}

absl::Status EventSource::LoadGroups(const Options& options, const BtfFile* btf_file) {
  absl::StatusOr<KernelTracepoints> tracepoints = btf_file == nullptr
                                                      ? KernelTracepoints::Running()
                                                      : KernelTracepoints::FromBtfFile(*btf_file);
  if (!tracepoints.ok()) return tracepoints.status();
  const std::string btf_path = btf_file == nullptr ? "" : btf_file->copy_path();
  if (options.sched && options.process && options.incidents && options.one_object &&
      LoadOneObject(options, *tracepoints, btf_path)) {
    return absl::OkStatus();
  }
  return LoadEachGroup(options, *tracepoints, btf_path);
}

bool EventSource::LoadOneObject(const Options& options, const KernelTracepoints& kernel,
                                const std::string& btf_path) {
  const GroupSetup setup{options,          {rings_fd_, drops_fd_, filter_cgroups_fd_},
                         ring_size_,       kernel,
                         raw_tracepoints_, btf_path};
  // All three as one object: one read of the kernel's BTF. A failure
  // (one group's program refused) is not reported, nor its verifier log
  // written (LoadError): the groups' own objects say which group it was,
  // and load the others.
  std::vector<std::string> skipped;
  const bool loaded = [&] {
    if ((all_ = OpenGroup(rs_all__open_opts, btf_path)) == nullptr) {
      one_object_refused_ = LoadFailureSummary(errno);
      return false;
    }
    if (absl::Status st = PrepareGroup(all_, setup, &skipped); !st.ok()) {
      one_object_refused_ = std::string(st.message());
      return false;
    }
    sched_batch_bytes_ = PrepareSched(all_, ring_size_, options.batch_sched);
    if (options.refuse_one_object_for_testing) {
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

absl::Status EventSource::LoadEachGroup(const Options& options, const KernelTracepoints& kernel,
                                        const std::string& btf_path) {
  const GroupSetup setup{options,          {rings_fd_, drops_fd_, filter_cgroups_fd_},
                         ring_size_,       kernel,
                         raw_tracepoints_, btf_path};
  // Each group loads on its own: one this kernel cannot run (a program its
  // verifier refuses) leaves the others running, with ftrace's fallback
  // events in its place. Load() fails only when no group it was asked for
  // loads.
  std::vector<RefusedGroup> refused;
  int requested = 0;
  // On failure the group is refused and destroyed, and its skipped
  // programs are not listed.
  auto attempt = [&](const char* group, auto** skel, auto open, auto load, auto destroy,
                     auto configure) {
    requested++;
    std::vector<std::string> skipped;
    absl::Status st = LoadOwnObject(group, skel, open, load, setup, &skipped, configure);
    if (st.ok()) {
      skipped_.insert(skipped_.end(), skipped.begin(), skipped.end());
      return;
    }
    if (*skel != nullptr) destroy(*skel);
    *skel = nullptr;
    refused.push_back({group, std::move(st)});
  };
  auto nothing_more = [](auto*) {};
  if (options.sched) {
    attempt("sched", &sched_, rs_sched__open_opts, rs_sched__load, rs_sched__destroy,
            [&](::rs_sched* skel) {
              sched_batch_bytes_ = PrepareSched(skel, ring_size_, options.batch_sched);
            });
    if (sched_ == nullptr) sched_batch_bytes_ = 0;
  }
  if (options.process) {
    attempt("process", &process_, rs_process__open_opts, rs_process__load, rs_process__destroy,
            nothing_more);
  }
  if (options.incidents) {
    attempt("incidents", &incidents_, rs_incidents__open_opts, rs_incidents__load,
            rs_incidents__destroy, nothing_more);
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
  refused_groups_ = std::move(refused);
  BindObjects();
  return absl::OkStatus();
}

void EventSource::BindObjects() {
  auto bind = [&](bpf_object* obj, auto* bss) {
    objects_.push_back({obj, bss->stopping, bss->outside_window});
  };
  // The scheduling group's handles, in whichever object it loaded.
  auto bind_sched = [&](auto* skel) {
    has_sched_ = true;
    flush_sched_batch_fd_ = bpf_program__fd(skel->progs.flush_sched_batch);
    batch_waiting_ = skel->bss->batch_waiting;
    sched_batches_ = skel->maps.sched_batches;
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

EventSource::~EventSource() {
  Detach();
  if (all_ != nullptr) rs_all__destroy(all_);
  if (sched_ != nullptr) rs_sched__destroy(sched_);
  if (process_ != nullptr) rs_process__destroy(process_);
  if (incidents_ != nullptr) rs_incidents__destroy(incidents_);
  reader_.reset();  // Unmaps the rings before their fds close.
  for (int fd : ring_fds_) close(fd);
  if (rings_fd_ >= 0) close(rings_fd_);
  if (drops_fd_ >= 0) close(drops_fd_);
  if (filter_cgroups_fd_ >= 0) close(filter_cgroups_fd_);
}

absl::Status EventSource::Attach() {
  // Programs are attached one by one, none recording until all are. Then
  // the process programs (fork, exec, exit, rename, free) start recording,
  // first; the scheduling and incident ones after them (SetRecording).
  // Every task in a scheduling record is then described by the process
  // records: even one already exiting then, which the start-up scan no
  // longer finds, is named by its exit.
  SetRecording(false);
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
  SetRecording(true);
  return absl::OkStatus();
}

void EventSource::SetStopping(Group group, bool stopping) {
  for (const EventType& e : kEventTypes) {
    if (e.group != group) continue;
    for (const LoadedObject& o : objects_) o.stopping[e.type] = stopping ? 1 : 0;
  }
}

void EventSource::SetRecording(bool on) {
  // Process records first on, last off; scheduling last on, first off:
  // what the others record is inside the window the process records
  // describe.
  if (on) {
    SetStopping(Group::kProcess, false);
    SetStopping(Group::kIncidents, false);
    SetStopping(Group::kSched, false);
  } else {
    SetStopping(Group::kSched, true);
    SetStopping(Group::kIncidents, true);
    SetStopping(Group::kProcess, true);
  }
}

void EventSource::Detach() {
  // Every program stops recording at once, then they are detached one by
  // one (a grace period each).
  SetRecording(false);
  if (all_ != nullptr) rs_all__detach(all_);
  if (sched_ != nullptr) rs_sched__detach(sched_);
  if (process_ != nullptr) rs_process__detach(process_);
  if (incidents_ != nullptr) rs_incidents__detach(incidents_);
}

absl::Status EventSource::SetCgroupFilter(const std::vector<uint64_t>& cgroup_ids) {
  std::vector<uint64_t> wanted = cgroup_ids;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  if (wanted.size() > RS_MAX_FILTER_CGROUPS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "at most ", RS_MAX_FILTER_CGROUPS, " cgroups can be filtered on, not ", wanted.size()));
  }
  // Additions first, so a cgroup in both sets is never missing.
  const uint8_t present = 1;
  for (uint64_t id : wanted) {
    if (std::binary_search(filter_cgroups_.begin(), filter_cgroups_.end(), id)) continue;
    if (bpf_map_update_elem(filter_cgroups_fd_, &id, &present, BPF_ANY) != 0) {
      return LoadError(errno, "updating the cgroup filter");
    }
  }
  for (uint64_t id : filter_cgroups_) {
    if (std::binary_search(wanted.begin(), wanted.end(), id)) continue;
    if (bpf_map_delete_elem(filter_cgroups_fd_, &id) != 0 && errno != ENOENT) {
      return LoadError(errno, "updating the cgroup filter");
    }
  }
  filter_cgroups_ = std::move(wanted);
  return absl::OkStatus();
}

void EventSource::FlushSchedBatches(uint64_t waited_ns) {
  if (!has_sched_ || sched_batch_bytes_ == 0) return;
  const int fd = flush_sched_batch_fd_;
  timespec now_ts;
  clock_gettime(CLOCK_BOOTTIME, &now_ts);
  const uint64_t now =
      static_cast<uint64_t>(now_ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now_ts.tv_nsec);
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    // Written by that CPU's programs as we read: a stale value only moves
    // the flush to the next call.
    const uint64_t since = __atomic_load_n(&batch_waiting_[cpu * 8], __ATOMIC_RELAXED);
    if (since == 0 || (waited_ns != 0 && (since > now || now - since < waited_ns))) continue;
    // It returns 1 when it interrupted a program adding a record: that
    // lasts a few hundred nanoseconds, so a few tries are plenty. It fails
    // only for an offline CPU, whose batch waits for its return.
    for (int attempt = 0; attempt < 8; attempt++) {
      LIBBPF_OPTS(bpf_test_run_opts, opts, .flags = BPF_F_TEST_RUN_ON_CPU,
                  .cpu = static_cast<uint32_t>(cpu));
      if (bpf_prog_test_run_opts(fd, &opts) != 0 || opts.retval == 0) break;
    }
  }
}

std::vector<uint64_t> EventSource::records_waiting(uint32_t event_type) const {
  std::vector<uint64_t> per_cpu(static_cast<size_t>(num_cpus_), 0);
  if (!has_sched_ || sched_batch_bytes_ == 0 || event_type >= RS_SCHED_BATCH_TYPES) {
    return per_cpu;
  }
  // Every CPU's batch in one lookup, the per-type counts read out of each.
  const size_t value_size = bpf_map__value_size(sched_batches_);
  const size_t stride = (value_size + 7) / 8 * 8;
  std::vector<uint8_t> values(stride * per_cpu.size());
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(sched_batches_), &zero, values.data()) != 0) {
    return per_cpu;
  }
  for (size_t cpu = 0; cpu < per_cpu.size(); cpu++) {
    uint32_t count;
    std::memcpy(&count,
                values.data() + stride * cpu + offsetof(rs_sched_batch_state, records) +
                    event_type * sizeof(uint32_t),
                sizeof(count));
    per_cpu[cpu] = count;
  }
  return per_cpu;
}

namespace {

bool IsSchedBatch(const RecordView& r) {
  return r.size >= sizeof(rs_event_header) &&
         static_cast<const rs_event_header*>(r.data)->type == RS_EV_SCHED_BATCH;
}

}  // namespace

RingReader::BatchCallback EventSource::Unbatching(const RingReader::BatchCallback& callback,
                                                  uint64_t* handed_out) {
  return [this, &callback, handed_out](uint32_t ring, absl::Span<const RecordView> records) {
    if (std::none_of(records.begin(), records.end(), IsSchedBatch)) {
      *handed_out += records.size();
      return callback(ring, records);
    }
    // At most RingReader::kMaxBatch records a call, as the reader gives
    // them: a consumer writes each call as one packet, and its size stays
    // bounded (a ring's worth of batches in one packet would be megabytes,
    // which a small buffer could never hold whole).
    unbatched_.clear();
    auto add = [&](const RecordView& v) {
      unbatched_.push_back(v);
      if (unbatched_.size() < RingReader::kMaxBatch) return;
      *handed_out += unbatched_.size();
      callback(ring, absl::MakeConstSpan(unbatched_));
      unbatched_.clear();
    };
    for (const RecordView& r : records) {
      if (!IsSchedBatch(r)) {
        add(r);
        continue;
      }
      // Each record has its own header, and the decoder checks each as it
      // would a record on its own. Whatever the ring holds, the walk stays
      // inside the batch: a size that cannot be a record's ends it, and
      // the rest is handed out as one record, for the decoder to refuse.
      const auto* bytes = static_cast<const uint8_t*>(r.data);
      size_t at = sizeof(rs_event_header);
      while (at + sizeof(rs_event_header) <= r.size) {
        rs_event_header h;
        std::memcpy(&h, bytes + at, sizeof(h));
        if (h.size < sizeof(h) || h.size % 8 != 0 || h.size > r.size - at) break;
        add(RecordView{bytes + at, h.size});
        at += h.size;
      }
      if (at < r.size) add(RecordView{bytes + at, static_cast<uint32_t>(r.size - at)});
    }
    if (unbatched_.empty()) return;
    *handed_out += unbatched_.size();
    callback(ring, absl::MakeConstSpan(unbatched_));
  };
}

absl::StatusOr<uint64_t> EventSource::Poll(int timeout_ms,
                                           const RingReader::BatchCallback& callback) {
  uint64_t handed_out = 0;
  const RingReader::BatchCallback unbatching = Unbatching(callback, &handed_out);
  if (absl::StatusOr<uint64_t> n = reader_->Poll(timeout_ms, unbatching); !n.ok()) {
    return n.status();
  }
  FlushSchedBatches(kBatchMaxWaitNs);
  reader_->Drain(unbatching);
  return handed_out;
}

uint64_t EventSource::Drain(const RingReader::BatchCallback& callback) {
  uint64_t handed_out = 0;
  const RingReader::BatchCallback unbatching = Unbatching(callback, &handed_out);
  // The rings first: a batch sent into a ring still full of unread records
  // would be dropped, and a storm keeps them full until this reads them.
  reader_->Drain(unbatching);
  FlushSchedBatches();
  reader_->Drain(unbatching);
  return handed_out;
}

std::vector<uint64_t> EventSource::drops_per_cpu(uint32_t event_type) const {
  std::vector<uint64_t> per_cpu(static_cast<size_t>(num_cpus_), 0);
  if (bpf_map_lookup_elem(drops_fd_, &event_type, per_cpu.data()) != 0) {
    std::fill(per_cpu.begin(), per_cpu.end(), 0);
  }
  return per_cpu;
}

std::vector<std::vector<uint64_t>> EventSource::all_drops_per_cpu() const {
  const size_t cpus = static_cast<size_t>(num_cpus_);
  std::vector<std::vector<uint64_t>> out(RS_EV_MAX, std::vector<uint64_t>(cpus, 0));
  // A per-CPU value is one u64 per possible CPU, for each key in turn.
  std::vector<uint32_t> keys(RS_EV_MAX);
  std::vector<uint64_t> values(RS_EV_MAX * cpus);
  uint32_t count = RS_EV_MAX;
  uint32_t next_key = 0;
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  // The whole array in one call: ENOENT says it reached the last key.
  const int err = bpf_map_lookup_batch(drops_fd_, nullptr, &next_key, keys.data(), values.data(),
                                       &count, &opts);
  if ((err == 0 || err == -ENOENT) && count == RS_EV_MAX) {
    for (uint32_t k = 0; k < count; k++) {
      if (keys[k] >= RS_EV_MAX) continue;
      std::copy(values.begin() + k * cpus, values.begin() + (k + 1) * cpus, out[keys[k]].begin());
    }
    return out;
  }
  for (uint32_t type = 0; type < RS_EV_MAX; type++) out[type] = drops_per_cpu(type);
  return out;
}

uint64_t EventSource::drops(uint32_t event_type) const {
  uint64_t total = 0;
  for (uint64_t v : drops_per_cpu(event_type)) total += v;
  return total;
}

uint64_t EventSource::not_recorded(uint32_t event_type) const {
  if (event_type >= RS_EV_MAX) return 0;
  uint64_t total = 0;
  // The .bss of each object is mapped: its counters read in place.
  for (const LoadedObject& o : objects_) {
    total += __atomic_load_n(&o.outside_window[event_type], __ATOMIC_RELAXED);
  }
  return total;
}

std::vector<EventSource::ProgramStats> EventSource::program_stats() const {
  std::vector<ProgramStats> out;
  for (const LoadedObject& o : objects_) {
    bpf_program* prog;
    bpf_object__for_each_program(prog, o.obj) {
      const int fd = bpf_program__fd(prog);
      if (fd < 0) continue;  // Not loaded on this kernel.
      bpf_prog_info info;
      std::memset(&info, 0, sizeof(info));
      uint32_t len = sizeof(info);
      if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
      out.push_back(ProgramStats{bpf_program__name(prog), info.run_cnt, info.run_time_ns,
                                 info.recursion_misses});
    }
  }
  return out;
}

int EventSource::EnableKernelStats() { return bpf_enable_stats(BPF_STATS_RUN_TIME); }

}  // namespace ringside::bpf
