#include "tests/testing/perf_tracepoint_counter.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::testing {

PerfTracepointCounter::~PerfTracepointCounter() {
  for (int fd : fds_) close(fd);
}

absl::Status PerfTracepointCounter::Open(absl::string_view event, const std::string& filter) {
  const auto& tracefs = ftrace::testing::KernelTracefs();
  if (!tracefs.ok()) return tracefs.status();
  absl::StatusOr<std::string> id = tracefs->Read(absl::StrCat("events/", event, "/id"));
  uint64_t config = 0;
  if (!id.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*id), &config)) {
    return absl::NotFoundError(absl::StrCat("no tracepoint id for ", event));
  }
  perf_event_attr attr = {};
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof(attr);
  attr.config = config;
  attr.disabled = 1;
  for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++) {
    const int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) return absl::ErrnoToStatus(errno, "perf_event_open");
    fds_.push_back(fd);
    if (!filter.empty() && ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("perf filter ", filter));
    }
  }
  return absl::OkStatus();
}

void PerfTracepointCounter::Enable() {
  for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

void PerfTracepointCounter::Disable() {
  for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

std::vector<int64_t> PerfTracepointCounter::CountPerCpu() const {
  std::vector<int64_t> counts;
  for (int fd : fds_) {
    uint64_t n = 0;
    counts.push_back(read(fd, &n, sizeof(n)) == sizeof(n) ? static_cast<int64_t>(n) : -1);
  }
  return counts;
}

int64_t PerfTracepointCounter::Count() const {
  int64_t total = 0;
  for (int64_t n : CountPerCpu()) total += n > 0 ? n : 0;
  return total;
}

}  // namespace ringside::testing
