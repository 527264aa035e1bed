#include "bpf/cpu_sampler.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace ringside::bpf {

absl::StatusOr<std::unique_ptr<CpuSampler>> CpuSampler::Open(uint32_t hz, int num_cpus) {
  std::unique_ptr<CpuSampler> s(new CpuSampler());
  for (int cpu = 0; cpu < num_cpus; cpu++) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = hz;
    attr.disabled = 1;  // Until the program is attached (libbpf enables it then).
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, /*pid=*/-1, cpu,
                                            /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      // An offline CPU, or one the machine could have but has not.
      if (errno == ENODEV || errno == EINVAL) continue;
      return base::ErrnoToStatus(
          errno, absl::StrCat("perf_event_open (cpu-clock, CPU ", cpu,
                              "; needs CAP_PERFMON, or kernel.perf_event_paranoid below 1)"));
    }
    s->events_.emplace_back(fd);
  }
  return s;
}

absl::Status CpuSampler::Attach(bpf_program* program) {
  for (const base::ScopedFd& event : events_) {
    // libbpf closes the fd of a perf event link when the link goes: it
    // gets a copy, so that the event stays ours, to attach again after a
    // Detach and to close once (not a number some other thread opened
    // since).
    base::ScopedFd copy(fcntl(event.get(), F_DUPFD_CLOEXEC, 0));
    bpf_link* link = copy.valid() ? bpf_program__attach_perf_event(program, copy.get()) : nullptr;
    if (link == nullptr) {
      const int err = errno;
      Detach();
      return base::ErrnoToStatus(err, "attaching the CPU sampling program to its perf events");
    }
    (void)copy.release();  // The link's now.
    links_.push_back(link);
  }
  return absl::OkStatus();
}

void CpuSampler::Detach() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  links_.clear();
}

CpuSampler::~CpuSampler() { Detach(); }

}  // namespace ringside::bpf
