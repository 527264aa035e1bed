#ifndef RINGSIDE_BASE_FILE_IO_H_
#define RINGSIDE_BASE_FILE_IO_H_

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include "absl/strings/string_view.h"

namespace ringside::base {

// `call()` (a syscall returning -1 with errno set on failure) again for as
// long as a signal interrupts it (Perfetto's PERFETTO_EINTR, glibc's
// TEMP_FAILURE_RETRY): RetryOnEintr([&] { return open(path, O_RDONLY); }).
// Not for close(): see scoped_fd.h.
template <typename Call>
auto RetryOnEintr(Call call) {
  decltype(call()) result;
  do {
    result = call();
  } while (result == -1 && errno == EINTR);
  return result;
}

// What a whole read or write did: the bytes moved, and the errno that
// stopped it early (0 when it did not fail).
struct IoResult {
  size_t bytes = 0;
  int err = 0;
  bool ok() const { return err == 0; }
};

// Writes all of `data` to `fd` at its file offset, over partial writes and
// EINTR. On failure `err` is the errno (EIO for a write that took nothing)
// and `bytes` what went out before it.
// REQUIRES: `fd` blocking (EAGAIN is an error here).
IoResult WriteAll(int fd, absl::string_view data);

// The same with pwrite() from `offset`; the file offset does not move.
IoResult WriteAllAt(int fd, absl::string_view data, off_t offset);

// Reads until `size` bytes are in `buf`, end of file or an error, over short
// reads and EINTR. At end of file `bytes` < `size` and `err` is 0.
IoResult ReadFull(int fd, void* buf, size_t size);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_FILE_IO_H_
