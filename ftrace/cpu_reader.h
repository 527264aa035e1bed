#ifndef RINGSIDE_FTRACE_CPU_READER_H_
#define RINGSIDE_FTRACE_CPU_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"
#include "ftrace/tracefs.h"

namespace ringside::ftrace {

// Reads whole pages from one CPU's per_cpu/cpuN/trace_pipe_raw of an
// instance. Reading consumes them from the kernel buffer. Non-blocking: a
// read returns what is there now.
class CpuReader {
 public:
  static absl::StatusOr<std::unique_ptr<CpuReader>> Open(const Instance& instance, int cpu,
                                                         size_t page_size);
  // A reader of `fd` (a pipe or a file of crafted pages), which it owns from
  // now on; reads behave as on trace_pipe_raw.
  static std::unique_ptr<CpuReader> FromFdForTesting(int cpu, int fd, size_t page_size) {
    return std::unique_ptr<CpuReader>(new CpuReader(cpu, fd, page_size));
  }
  ~CpuReader();
  CpuReader(const CpuReader&) = delete;
  CpuReader& operator=(const CpuReader&) = delete;

  // Appends up to `max_pages` pages to *pages (page_size() bytes each).
  // Returns the number of pages read; 0 when the buffer has no full page or
  // committed data to give.
  absl::StatusOr<size_t> ReadPages(size_t max_pages, std::vector<uint8_t>* pages);

  int cpu() const { return cpu_; }
  int fd() const { return fd_.get(); }
  size_t page_size() const { return page_size_; }

 private:
  CpuReader(int cpu, int fd, size_t page_size) : cpu_(cpu), fd_(fd), page_size_(page_size) {}
  int cpu_;
  base::ScopedFd fd_;
  size_t page_size_;
};

}  // namespace ringside::ftrace

#endif  // RINGSIDE_FTRACE_CPU_READER_H_
