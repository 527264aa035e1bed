#include "base/dir_stream.h"

#include <fcntl.h>

#include <cerrno>

#include "base/scoped_fd.h"

namespace ringside::base {

DirStream OpenDirStream(int dir_fd) {
  ScopedFd own(fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return nullptr;
  DIR* d = fdopendir(own.get());
  if (d == nullptr) {
    const int err = errno;  // Not close()'s.
    own.reset();
    errno = err;
    return nullptr;
  }
  static_cast<void>(own.release());  // closedir() closes it.
  rewinddir(d);
  return DirStream(d);
}

}  // namespace ringside::base
