#include "bpf/sched_source.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "bpf/sched_events.h"
#include "sched.skel.h"

namespace ringside::bpf {
namespace {

// libbpf's messages, kept for the error of a failed load (the verifier log).
std::string& LibbpfLog() {
  static std::string log;
  return log;
}

int CaptureLibbpfOutput(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[1024];
  vsnprintf(line, sizeof(line), format, args);
  std::string& log = LibbpfLog();
  if (log.size() < 64 * 1024) log += line;
  return 0;
}

absl::Status LoadError(int err, const std::string& what) {
  const std::string log = LibbpfLog();
  if (err == EPERM || err == EACCES) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": ", std::strerror(err),
        " (BPF needs root or CAP_BPF + CAP_PERFMON; check kernel.unprivileged_bpf_disabled)"));
  }
  if (err == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": out of locked memory; raise RLIMIT_MEMLOCK (ulimit -l) or the memcg limit"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", std::strerror(err), "\n", log));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SchedSource>> SchedSource::Load(Options options) {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    return absl::UnavailableError(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE BPF programs cannot load; "
        "use the ftrace sources instead");
  }
  libbpf_set_print(CaptureLibbpfOutput);
  LibbpfLog().clear();
  std::unique_ptr<SchedSource> s(new SchedSource());
  s->skel_ = sched__open();
  if (s->skel_ == nullptr) return LoadError(errno, "opening the sched BPF object");

  // Ring size: a power of two number of pages.
  size_t ring = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (ring < options.ring_size_per_cpu) ring <<= 1;
  s->num_cpus_ = libbpf_num_possible_cpus();
  if (s->num_cpus_ <= 0 || s->num_cpus_ > RS_MAX_CPUS) {
    return absl::UnavailableError(absl::StrCat("unsupported CPU count ", s->num_cpus_));
  }
  // The rings' size is fixed by the inner-map template the program is
  // verified against: give it one of the size we want.
  const int template_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring_tmpl", 0, 0,
                                         static_cast<uint32_t>(ring), nullptr);
  if (template_fd < 0) return LoadError(errno, "creating the ring template");
  bpf_map__set_inner_map_fd(s->skel_->maps.rings, template_fd);
  bpf_map__set_max_entries(s->skel_->maps.rings, static_cast<uint32_t>(s->num_cpus_));
  const int err = sched__load(s->skel_);
  close(template_fd);
  if (err != 0) return LoadError(-err, "loading the sched BPF programs");
  // One ring per CPU, plugged into the array the program indexes by CPU.
  const int outer = bpf_map__fd(s->skel_->maps.rings);
  for (int cpu = 0; cpu < s->num_cpus_; cpu++) {
    const int fd =
        bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring", 0, 0, static_cast<uint32_t>(ring), nullptr);
    if (fd < 0) return LoadError(errno, absl::StrCat("creating the ring of CPU ", cpu));
    s->ring_fds_.push_back(fd);
    const uint32_t key = static_cast<uint32_t>(cpu);
    if (bpf_map_update_elem(outer, &key, &fd, BPF_ANY) != 0) {
      return LoadError(errno, absl::StrCat("installing the ring of CPU ", cpu));
    }
    s->contexts_.push_back(std::make_unique<RingContext>(RingContext{s.get(), key}));
    if (s->rings_ == nullptr) {
      s->rings_ = ring_buffer__new(fd, &SchedSource::OnRecord, s->contexts_.back().get(), nullptr);
      if (s->rings_ == nullptr) return LoadError(errno, "opening the ring consumer");
    } else if (ring_buffer__add(s->rings_, fd, &SchedSource::OnRecord, s->contexts_.back().get()) !=
               0) {
      return LoadError(errno, absl::StrCat("adding the ring of CPU ", cpu));
    }
  }
  return s;
}

SchedSource::~SchedSource() {
  Detach();
  if (rings_ != nullptr) ring_buffer__free(rings_);
  for (int fd : ring_fds_) close(fd);
  if (skel_ != nullptr) sched__destroy(skel_);
}

absl::Status SchedSource::Attach() {
  if (int err = sched__attach(skel_); err != 0) {
    return LoadError(-err, "attaching tp_btf/sched_switch");
  }
  return absl::OkStatus();
}

void SchedSource::Detach() {
  if (skel_ != nullptr) sched__detach(skel_);
}

int SchedSource::OnRecord(void* ctx, void* data, size_t size) {
  auto* c = static_cast<RingContext*>(ctx);
  if (c->self->callback_ != nullptr) (*c->self->callback_)(c->cpu, data, size);
  return 0;
}

absl::StatusOr<int> SchedSource::Poll(int timeout_ms, const RecordCallback& callback) {
  callback_ = &callback;
  int n = ring_buffer__poll(rings_, timeout_ms);
  if (n >= 0) {
    // Take whatever arrived while we were handling the first batch.
    const int more = ring_buffer__consume(rings_);
    if (more > 0) n += more;
  }
  callback_ = nullptr;
  if (n < 0 && n != -EINTR) {
    return absl::UnavailableError(absl::StrCat("polling the BPF rings: ", std::strerror(-n)));
  }
  return n < 0 ? 0 : n;
}

uint64_t SchedSource::drops(uint32_t event_type) const {
  std::vector<uint64_t> per_cpu(static_cast<size_t>(libbpf_num_possible_cpus()));
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.drops), &event_type, per_cpu.data()) != 0) {
    return 0;
  }
  uint64_t total = 0;
  for (uint64_t v : per_cpu) total += v;
  return total;
}

}  // namespace ringside::bpf
