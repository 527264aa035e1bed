#include "ftrace/cpu_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace ringside::ftrace {

absl::StatusOr<std::unique_ptr<CpuReader>> CpuReader::Open(const Instance& instance, int cpu,
                                                           size_t page_size) {
  const std::string path = absl::StrCat(instance.path(), "/per_cpu/cpu", cpu, "/trace_pipe_raw");
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message + " (CPU offline?)");
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  return std::unique_ptr<CpuReader>(new CpuReader(cpu, fd, page_size));
}

CpuReader::~CpuReader() = default;

absl::StatusOr<size_t> CpuReader::ReadPages(size_t max_pages, std::vector<uint8_t>* pages) {
  size_t read_pages = 0;
  while (read_pages < max_pages) {
    const size_t at = pages->size();
    pages->resize(at + page_size_);
    const ssize_t n =
        base::RetryOnEintr([&] { return read(fd_.get(), pages->data() + at, page_size_); });
    if (n <= 0) {
      pages->resize(at);
      if (n == 0 || errno == EAGAIN) break;
      return absl::UnavailableError(
          absl::StrCat("reading trace_pipe_raw of cpu ", cpu_, ": ", std::strerror(errno)));
    }
    if (static_cast<size_t>(n) != page_size_) {
      // The kernel hands out whole pages; anything else we cannot parse.
      pages->resize(at);
      return absl::DataLossError(absl::StrCat("trace_pipe_raw of cpu ", cpu_, " returned ", n,
                                              " bytes, not a ", page_size_, "-byte page"));
    }
    read_pages++;
  }
  return read_pages;
}

}  // namespace ringside::ftrace
