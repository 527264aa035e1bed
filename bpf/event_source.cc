#include "bpf/event_source.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/boottime.h"
#include "bpf/btf_file.h"
#include "bpf/common_events.h"
#include "bpf/kernel_tracepoints.h"
#include "bpf/load_errors.h"
#include "bpf/sched_events.h"

namespace ringside::bpf {

namespace {

// Where blocked threads' stacks are taken: as they run again, by a kprobe
// on `*resume_function`, where the kernel has kprobes; else by the switch
// as they leave, if `stacks` allows it; else not at all: the flag is
// cleared and the reason returned.
std::string PlaceBlockedStacks(LoadedGroups::Request::Stacks* stacks,
                               std::string* resume_function) {
  if ((stacks->flags & RS_STACKS_BLOCKED) == 0) return "";
  *resume_function = ProbeableResumeFunction();
  stacks->at_switch = resume_function->empty();
  if (!stacks->at_switch || stacks->at_switch_allowed) return "";
  stacks->flags &= ~RS_STACKS_BLOCKED;
  stacks->at_switch = false;
  return "this kernel has no kprobes (no /sys/bus/event_source/devices/kprobe); write "
         "bpf_config.stacks.blocked: true to take them as threads leave the CPU instead, every "
         "block (dearer)";
}

absl::Status CheckFilters(const LoadedGroups::Filters& filters) {
  if (filters.tgids.size() <= RS_MAX_FILTER_TGIDS) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "at most ", RS_MAX_FILTER_TGIDS, " tgids can be filtered on, not ", filters.tgids.size()));
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
  if (absl::Status st = CheckFilters(options.filters); !st.ok()) return st;
  std::string resume_function;
  std::string blocked_off = PlaceBlockedStacks(&effective.stacks, &resume_function);
  std::string runqueue_off = PlaceRunqueueDelays(effective.btf_path, &effective.stalls.runqueue_ns);
  CaptureLibbpfLog();
  std::unique_ptr<EventSource> s(new EventSource());
  if (absl::Status st = s->CreateMaps(options.ring_size_per_cpu); !st.ok()) return st;
  s->raw_tracepoints_ = !kernel_btf;
  absl::StatusOr<KernelTracepoints> tracepoints = btf_file == nullptr
                                                      ? KernelTracepoints::Running()
                                                      : KernelTracepoints::FromBtfFile(*btf_file);
  if (!tracepoints.ok()) return tracepoints.status();
  // The copy is needed until the objects are loaded (libbpf relocates at
  // load), not after.
  const LoadedGroups::Target target{s->rings_fd_.get(),
                                    s->drops_.fd(),
                                    s->seen_fd_.get(),
                                    s->filter_cgroups_fd_.get(),
                                    s->ring_size_,
                                    s->raw_tracepoints_,
                                    btf_file == nullptr ? "" : btf_file->copy_path()};
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups =
      LoadedGroups::Load(effective, target, *tracepoints);
  if (!groups.ok()) return groups.status();
  s->groups_ = std::move(*groups);
  if (const LoadedGroups::SchedHandles& h = s->groups_->sched(); s->groups_->has_sched()) {
    s->stacks_ =
        StackMaps(h.stack_losses, h.blocked_unsampled, effective.stacks.flags, s->num_cpus_,
                  h.resume_blocked, resume_function, h.sample_cpu_stack, options.stacks.cpu_hz);
    if (!blocked_off.empty()) s->stacks_.RefuseBlocked(std::move(blocked_off));
    s->stalls_ = StallTasks(h.stall_tasks, h.stall_tasks_full, effective.stalls.blocked_ns,
                            std::move(runqueue_off));
  }
  return s;
}

absl::Status EventSource::CreateMaps(size_t ring_size_per_cpu) {
  num_cpus_ = libbpf_num_possible_cpus();
  if (num_cpus_ <= 0 || num_cpus_ > RS_MAX_CPUS) {
    return absl::UnavailableError(absl::StrCat("unsupported CPU count ", num_cpus_));
  }
  // Ring size: a power of two number of pages.
  ring_size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (ring_size_ < ring_size_per_cpu) ring_size_ <<= 1;
  const uint32_t ring_size = static_cast<uint32_t>(ring_size_);

  // The maps every program shares. The outer array's inner-map template
  // fixes the ring size the programs are verified against.
  base::ScopedFd ring_template(
      bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring_tmpl", 0, 0, ring_size, nullptr));
  if (!ring_template.valid()) return LoadError(errno, "creating a BPF ring buffer");
  LIBBPF_OPTS(bpf_map_create_opts, outer_opts,
              .inner_map_fd = static_cast<__u32>(ring_template.get()));
  rings_fd_.reset(bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "rs_rings", sizeof(uint32_t),
                                 sizeof(uint32_t), static_cast<uint32_t>(num_cpus_), &outer_opts));
  const int outer_errno = errno;
  ring_template.reset();  // The outer array keeps what it needs of it.
  if (!rings_fd_.valid()) return LoadError(outer_errno, "creating the per-CPU ring array");
  absl::StatusOr<DropCounters> drops = DropCounters::Create(num_cpus_);
  if (!drops.ok()) return drops.status();
  drops_ = std::move(*drops);
  seen_fd_.reset(bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "rs_seen", sizeof(uint32_t),
                                sizeof(uint64_t) * RS_EV_MAX, 1, nullptr));
  if (!seen_fd_.valid()) return LoadError(errno, "creating the counters of records seen");
  filter_cgroups_fd_.reset(bpf_map_create(BPF_MAP_TYPE_HASH, "rs_filter_cg", sizeof(uint64_t),
                                          sizeof(uint8_t), RS_MAX_FILTER_CGROUPS, nullptr));
  if (!filter_cgroups_fd_.valid()) return LoadError(errno, "creating the cgroup filter");
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    const int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring", 0, 0, ring_size, nullptr);
    if (fd < 0) return LoadError(errno, absl::StrCat("creating the ring of CPU ", cpu));
    rings_.emplace_back(fd);
    const uint32_t key = static_cast<uint32_t>(cpu);
    if (bpf_map_update_elem(rings_fd_.get(), &key, &fd, BPF_ANY) != 0) {
      return LoadError(errno, absl::StrCat("installing the ring of CPU ", cpu));
    }
  }
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Create(ring_fds(), ring_size_);
  if (!reader.ok()) return reader.status();
  reader_ = std::move(*reader);
  return absl::OkStatus();
}

EventSource::~EventSource() {
  Detach();
  groups_.reset();
  reader_.reset();  // Unmaps the rings before their fds close.
}

absl::Status EventSource::Attach() {
  // Programs are attached one by one, none recording until all are. Then
  // the process programs (fork, exec, exit, rename, free) start recording,
  // first; the scheduling and incident ones after them (SetRecording).
  // Every task in a scheduling record is then described by the process
  // records: even one already exiting then, which the start-up scan no
  // longer finds, is named by its exit.
  SetRecording(false);
  if (absl::Status st = groups_->Attach(); !st.ok()) return st;
  if (absl::Status st = stacks_.Start(); !st.ok()) return st;
  SetRecording(true);
  return absl::OkStatus();
}

void EventSource::SetRecording(bool on) {
  // Process records first on, last off; scheduling last on, first off:
  // what the others record is inside the window the process records
  // describe.
  if (groups_ == nullptr) return;
  if (on) {
    groups_->SetStopping(Group::kProcess, false);
    groups_->SetStopping(Group::kIncidents, false);
    groups_->SetStopping(Group::kSched, false);
  } else {
    groups_->SetStopping(Group::kSched, true);
    groups_->SetStopping(Group::kIncidents, true);
    groups_->SetStopping(Group::kProcess, true);
  }
}

void EventSource::Detach() {
  // Every program stops recording at once, then they are detached one by
  // one (a grace period each).
  SetRecording(false);
  stacks_.Stop();
  if (groups_ != nullptr) groups_->Detach();
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
    if (bpf_map_update_elem(filter_cgroups_fd_.get(), &id, &present, BPF_ANY) != 0) {
      return LoadError(errno, "updating the cgroup filter");
    }
  }
  for (uint64_t id : filter_cgroups_) {
    if (std::binary_search(wanted.begin(), wanted.end(), id)) continue;
    if (bpf_map_delete_elem(filter_cgroups_fd_.get(), &id) != 0 && errno != ENOENT) {
      return LoadError(errno, "updating the cgroup filter");
    }
  }
  filter_cgroups_ = std::move(wanted);
  return absl::OkStatus();
}

void EventSource::FlushSchedBatches(uint64_t before_ns) {
  if (!groups_->has_sched() || groups_->sched_batch_bytes() == 0) return;
  const int fd = groups_->sched().flush_sched_batch_fd;
  const __u64* batch_waiting = groups_->sched().batch_waiting;
  for (int cpu = 0; cpu < num_cpus_; cpu++) {
    // Written by that CPU's programs as we read: a stale value only moves
    // the flush to the next call.
    const uint64_t since = __atomic_load_n(&batch_waiting[cpu * 8], __ATOMIC_RELAXED);
    if (since == 0 || since >= before_ns) continue;
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
  if (!groups_->has_sched() || groups_->sched_batch_bytes() == 0 ||
      event_type >= RS_SCHED_BATCH_TYPES) {
    return per_cpu;
  }
  const bpf_map* sched_batches = groups_->sched().sched_batches;
  // Every CPU's batch in one lookup, the per-type counts read out of each.
  const size_t value_size = bpf_map__value_size(sched_batches);
  const size_t stride = (value_size + 7) / 8 * 8;
  std::vector<uint8_t> values(stride * per_cpu.size());
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(sched_batches), &zero, values.data()) != 0) {
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

// The records Unbatching() hands out, RingReader::kMaxBatch at most a
// call, written by index into room sized once: a push_back per record, in a
// lambda the compiler called out of line, held 20% of the BPF reader's
// profile samples beside `perf bench sched pipe`, 17% this way (most of it
// the first read of each record's header, in the ring).
class ViewsOut {
 public:
  ViewsOut(std::vector<RecordView>* room, uint32_t ring, const RingReader::BatchCallback& callback,
           uint64_t* handed_out)
      : ring_(ring), callback_(callback), handed_out_(handed_out) {
    if (room->size() < RingReader::kMaxBatch) room->resize(RingReader::kMaxBatch);
    views_ = room->data();
  }
  void Add(const RecordView& view) {
    views_[count_++] = view;
    if (count_ == RingReader::kMaxBatch) HandOut();
  }
  // What was added since the last call, if anything.
  [[gnu::noinline]] void HandOut() {
    if (count_ == 0) return;
    *handed_out_ += count_;
    callback_(ring_, absl::MakeConstSpan(views_, count_));
    count_ = 0;
  }

 private:
  const uint32_t ring_;
  const RingReader::BatchCallback& callback_;
  uint64_t* const handed_out_;
  RecordView* views_ = nullptr;
  size_t count_ = 0;
};

// Asks for every cache line of a record. A batch's walk reads each record's
// header to find the next one, so each line the other CPU wrote would
// otherwise be asked for only once the one before it had come.
void PrefetchLines(const RecordView& r) {
  constexpr size_t kLine = 64;
  const auto* bytes = static_cast<const uint8_t*>(r.data);
  for (size_t at = 0; at < r.size; at += kLine) __builtin_prefetch(bytes + at);
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
    ViewsOut out(&unbatched_, ring, callback, handed_out);
    PrefetchLines(records[0]);
    for (size_t i = 0; i < records.size(); i++) {
      const RecordView& r = records[i];
      // The next record's lines arrive while this one is walked.
      if (i + 1 < records.size()) PrefetchLines(records[i + 1]);
      if (!IsSchedBatch(r)) {
        out.Add(r);
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
        out.Add(RecordView{bytes + at, h.size});
        at += h.size;
      }
      if (at < r.size) out.Add(RecordView{bytes + at, static_cast<uint32_t>(r.size - at)});
    }
    out.HandOut();
  };
}

absl::StatusOr<uint64_t> EventSource::Poll(int timeout_ms,
                                           const RingReader::BatchCallback& callback) {
  uint64_t handed_out = 0;
  const RingReader::BatchCallback unbatching = Unbatching(callback, &handed_out);
  if (absl::StatusOr<uint64_t> n = reader_->Poll(timeout_ms, unbatching); !n.ok()) {
    return n.status();
  }
  const uint64_t now = base::BoottimeNs();
  FlushSchedBatches(now > kBatchMaxWaitNs ? now - kBatchMaxWaitNs : 0);
  reader_->Drain(unbatching);
  return handed_out;
}

uint64_t EventSource::Drain(const RingReader::BatchCallback& callback) {
  return DrainBefore(UINT64_MAX, callback);
}

uint64_t EventSource::DrainBefore(uint64_t before_ns, const RingReader::BatchCallback& callback) {
  uint64_t handed_out = 0;
  const RingReader::BatchCallback unbatching = Unbatching(callback, &handed_out);
  // The rings first: a batch sent into a ring still full of unread records
  // would be dropped, and a storm keeps them full until this reads them.
  reader_->Drain(unbatching);
  FlushSchedBatches(before_ns);
  reader_->Drain(unbatching);
  return handed_out;
}

std::vector<uint64_t> EventSource::drops_per_cpu(uint32_t event_type) const {
  return drops_.per_cpu(event_type);
}

namespace {

// The seen counters (PERCPU_ARRAY `fd` of one rs_seen_counts), by type then
// CPU; zeros if they cannot be read.
std::vector<std::vector<uint64_t>> ReadSeen(int fd, size_t cpus) {
  std::vector<std::vector<uint64_t>> out(RS_EV_MAX, std::vector<uint64_t>(cpus, 0));
  // One key; its per-CPU value is RS_EV_MAX counts for each CPU in turn.
  std::vector<uint64_t> values(RS_EV_MAX * cpus);
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(fd, &zero, values.data()) != 0) return out;
  for (size_t cpu = 0; cpu < cpus; cpu++) {
    for (uint32_t type = 0; type < RS_EV_MAX; type++) {
      out[type][cpu] = values[cpu * RS_EV_MAX + type];
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<uint64_t>> EventSource::all_drops_per_cpu() const {
  std::vector<std::vector<uint64_t>> out(RS_EV_MAX);
  for (uint32_t type = 0; type < RS_EV_MAX; type++) out[type] = drops_per_cpu(type);
  return out;
}

std::vector<std::vector<uint64_t>> EventSource::all_seen_per_cpu() const {
  const size_t cpus = static_cast<size_t>(num_cpus_);
  std::vector<std::vector<uint64_t>> out = ReadSeen(seen_fd_.get(), cpus);
  // Those waiting in a batch are not counted until it is sent or dropped.
  for (uint32_t type = 0; type < RS_EV_MAX; type++) {
    const std::vector<uint64_t> waiting = records_waiting(type);
    for (size_t cpu = 0; cpu < cpus && cpu < waiting.size(); cpu++) {
      out[type][cpu] += waiting[cpu];
    }
  }
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
  for (const LoadedGroups::Object& o : groups_->objects()) {
    total += __atomic_load_n(&o.outside_window[event_type], __ATOMIC_RELAXED);
  }
  return total;
}

std::vector<EventSource::ProgramStats> EventSource::program_stats() const {
  std::vector<ProgramStats> out;
  for (const LoadedGroups::Object& o : groups_->objects()) {
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
