#include "base/file_io.h"

#include <unistd.h>

namespace ringside::base {
namespace {

// Calls `step(done)` (one write() or read() of what is left) until `size`
// bytes moved, it fails, or (with `stop_at_zero`) it returns 0.
template <typename Step>
IoResult Loop(size_t size, bool stop_at_zero, Step step) {
  IoResult r;
  while (r.bytes < size) {
    const ssize_t n = RetryOnEintr([&] { return step(r.bytes); });
    if (n < 0) {
      r.err = errno;
      break;
    }
    if (n == 0) {
      if (!stop_at_zero) r.err = EIO;
      break;
    }
    r.bytes += static_cast<size_t>(n);
  }
  return r;
}

}  // namespace

IoResult WriteAll(int fd, absl::string_view data) {
  return Loop(data.size(), /*stop_at_zero=*/false,
              [&](size_t done) { return write(fd, data.data() + done, data.size() - done); });
}

IoResult WriteAllAt(int fd, absl::string_view data, off_t offset) {
  return Loop(data.size(), /*stop_at_zero=*/false, [&](size_t done) {
    return pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
  });
}

IoResult ReadFull(int fd, void* buf, size_t size) {
  char* p = static_cast<char*>(buf);
  return Loop(size, /*stop_at_zero=*/true,
              [&](size_t done) { return read(fd, p + done, size - done); });
}

}  // namespace ringside::base
