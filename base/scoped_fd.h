#ifndef RINGSIDE_BASE_SCOPED_FD_H_
#define RINGSIDE_BASE_SCOPED_FD_H_

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace ringside::base {

// Owns a file descriptor and closes it, once, when it goes out of scope
// (Perfetto's ScopedFile). Move-only; -1 is "none". Not thread-safe: one
// owner at a time, like the fd itself.
//
// close() is called once and never retried: on Linux the descriptor is
// released even when close() fails with EINTR, and retrying could close a
// number another thread has just been given.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  // The descriptor, still owned; -1 when none.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership: the caller closes what this returns.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }

  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) close(fd_);
    fd_ = fd;
  }

  // Closes the descriptor now and returns 0, or the errno close() failed
  // with: on NFS and other filesystems that write back at close, that is a
  // write lost, which the caller must report. Holds nothing afterwards,
  // whatever close() returned (see above). 0 when it held nothing.
  [[nodiscard]] int Close() {
    const int fd = std::exchange(fd_, -1);
    if (fd < 0) return 0;
    return close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_SCOPED_FD_H_
