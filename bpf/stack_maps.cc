#include "bpf/stack_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::bpf {
namespace {

template <typename Record>
StackFrames Frames(const Record& r, size_t record_size) {
  const size_t room =
      record_size > sizeof(Record) ? (record_size - sizeof(Record)) / sizeof(uint64_t) : 0;
  const size_t kernel = std::min<size_t>(r.kernel_frames, room);
  const size_t user = std::min<size_t>(r.user_frames, room - kernel);
  const uint64_t* frames = reinterpret_cast<const uint64_t*>(r.frames);
  return {absl::MakeConstSpan(frames, kernel), absl::MakeConstSpan(frames + kernel, user)};
}

constexpr absl::string_view kResumeFunction = "finish_task_switch";

}  // namespace

StackFrames FramesOf(const rs_stack_blocked& r, size_t record_size) {
  return Frames(r, record_size);
}

StackFrames FramesOf(const rs_stack_cpu_sample& r, size_t record_size) {
  return Frames(r, record_size);
}

std::string FindResumeFunction(absl::string_view kallsyms) {
  // Lines: "address type name [module]". The function itself first; else
  // a clone of it (".isra.0", ".constprop.0"), not its cold part.
  std::string clone;
  for (absl::string_view line : absl::StrSplit(kallsyms, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 3 || (f[1] != "t" && f[1] != "T")) continue;
    const absl::string_view name = f[2];
    if (name == kResumeFunction) return std::string(name);
    if (clone.empty() && absl::StartsWith(name, absl::StrCat(kResumeFunction, ".")) &&
        !absl::StrContains(name, ".cold")) {
      clone = std::string(name);
    }
  }
  return clone;
}

std::string ProbeableResumeFunction() {
  // The kprobe PMU (4.17+) is there when the kernel has kprobes.
  struct stat st;
  if (stat("/sys/bus/event_source/devices/kprobe", &st) != 0) return "";
  std::ifstream in("/proc/kallsyms");
  std::stringstream text;
  text << in.rdbuf();
  return FindResumeFunction(text.str());
}

StackMaps::StackMaps(const bpf_map* losses, const bpf_map* unsampled, uint32_t flags, int num_cpus,
                     bpf_program* resume_program, std::string resume_function,
                     bpf_program* sample_program, uint32_t cpu_hz)
    : losses_(losses), unsampled_(unsampled), flags_(flags), num_cpus_(num_cpus) {
  if (losses_ == nullptr || unsampled_ == nullptr) flags_ = 0;
  if (flags_ == 0) return;
  if ((flags_ & RS_STACKS_BLOCKED) != 0 && resume_program != nullptr && !resume_function.empty()) {
    resume_program_ = resume_program;
    resume_function_ = std::move(resume_function);
    if (absl::Status st = AttachResume(); !st.ok()) blocked_refused_ = std::string(st.message());
  }
  if (sample_program == nullptr || cpu_hz == 0) return;
  absl::StatusOr<std::unique_ptr<CpuSampler>> sampler = CpuSampler::Open(cpu_hz, num_cpus);
  if (!sampler.ok()) {
    sampling_refused_ = std::string(sampler.status().message());
    return;
  }
  sampler_ = std::move(*sampler);
  sample_program_ = sample_program;
}

StackMaps::~StackMaps() { Stop(); }

StackMaps::StackMaps(StackMaps&& other) noexcept { *this = std::move(other); }

StackMaps& StackMaps::operator=(StackMaps&& other) noexcept {
  if (this == &other) return *this;
  Stop();
  losses_ = other.losses_;
  unsampled_ = other.unsampled_;
  flags_ = other.flags_;
  num_cpus_ = other.num_cpus_;
  resume_program_ = other.resume_program_;
  resume_function_ = std::move(other.resume_function_);
  resume_link_ = std::exchange(other.resume_link_, nullptr);
  blocked_refused_ = std::move(other.blocked_refused_);
  sample_program_ = other.sample_program_;
  sampler_ = std::move(other.sampler_);
  sampling_refused_ = std::move(other.sampling_refused_);
  return *this;
}

absl::Status StackMaps::AttachResume() {
  if (resume_link_ != nullptr || resume_program_ == nullptr || resume_function_.empty()) {
    return absl::OkStatus();
  }
  bpf_link* link = bpf_program__attach_kprobe(resume_program_, false, resume_function_.c_str());
  if (link == nullptr) {
    const int err = errno;
    return absl::UnavailableError(absl::StrCat("attaching a kprobe on ", resume_function_,
                                               " (blocked threads' stacks): ", std::strerror(err)));
  }
  resume_link_ = link;
  return absl::OkStatus();
}

absl::Status StackMaps::Start() {
  if (blocked_refused_.empty()) {
    if (absl::Status st = AttachResume(); !st.ok()) return st;
  }
  return sampler_ == nullptr ? absl::OkStatus() : sampler_->Attach(sample_program_);
}

void StackMaps::Stop() {
  if (sampler_ != nullptr) sampler_->Detach();
  if (resume_link_ != nullptr) {
    bpf_link__destroy(resume_link_);
    resume_link_ = nullptr;
  }
}

std::vector<std::vector<uint64_t>> StackMaps::losses_per_cpu() const {
  const size_t cpus = static_cast<size_t>(num_cpus_);
  std::vector<std::vector<uint64_t>> out(RS_STACK_LOSS_MAX, std::vector<uint64_t>(cpus, 0));
  if (flags_ == 0) return out;
  // A per-CPU value is one u64 per possible CPU.
  for (uint32_t kind = 0; kind < RS_STACK_LOSS_MAX; kind++) {
    if (bpf_map_lookup_elem(bpf_map__fd(losses_), &kind, out[kind].data()) != 0) {
      std::fill(out[kind].begin(), out[kind].end(), 0);
    }
  }
  // Without the kprobe, no block gets a record (blocked_refused() says
  // why): the switches still keep each block, and count every one as
  // resumed unseen, or the table as full. Not losses of their own.
  if (!blocked_refused_.empty()) {
    for (uint32_t kind : {RS_STACK_LOSS_RESUME_UNSEEN, RS_STACK_LOSS_TASKS_FULL}) {
      std::fill(out[kind].begin(), out[kind].end(), 0);
    }
  }
  return out;
}

StackMaps::Unsampled StackMaps::unsampled() const {
  Unsampled out;
  if (flags_ == 0) return out;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(num_cpus_), 0);
  uint32_t key = RS_BLOCKED_UNSAMPLED_COUNT;
  if (bpf_map_lookup_elem(bpf_map__fd(unsampled_), &key, per_cpu.data()) == 0) {
    for (uint64_t n : per_cpu) out.blocks += n;
  }
  key = RS_BLOCKED_UNSAMPLED_NS;
  if (bpf_map_lookup_elem(bpf_map__fd(unsampled_), &key, per_cpu.data()) == 0) {
    for (uint64_t n : per_cpu) out.ns += n;
  }
  return out;
}

}  // namespace ringside::bpf
