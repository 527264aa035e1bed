// base/scoped_fd.h: the fd is closed exactly once, by its last owner, and
// not at all once released.
#include "base/scoped_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "gtest/gtest.h"

namespace ringside::base {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

int OpenDevNull() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(ScopedFdTest, ClosesOnDestruction) {
  int fd;
  {
    ScopedFd owned(OpenDevNull());
    fd = owned.get();
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(IsOpen(fd));
  }
  EXPECT_FALSE(IsOpen(fd));
}

TEST(ScopedFdTest, ReleasedFdStaysOpen) {
  int fd;
  {
    ScopedFd owned(OpenDevNull());
    fd = owned.release();
    EXPECT_EQ(owned.get(), -1);
    EXPECT_FALSE(owned.valid());
  }
  EXPECT_TRUE(IsOpen(fd));
  close(fd);
}

TEST(ScopedFdTest, MovedFromDoesNotCloseTheNewOwnersFd) {
  ScopedFd second;
  int fd;
  {
    ScopedFd first(OpenDevNull());
    fd = first.get();
    second = std::move(first);
  }
  EXPECT_EQ(second.get(), fd);
  EXPECT_TRUE(IsOpen(fd));
  ScopedFd third(std::move(second));
  EXPECT_TRUE(IsOpen(fd));
  third.reset();
  EXPECT_FALSE(IsOpen(fd));
}

TEST(ScopedFdTest, ResetClosesTheOldFdAndKeepsTheNew) {
  ScopedFd owned(OpenDevNull());
  const int old_fd = owned.get();
  const int new_fd = OpenDevNull();
  owned.reset(new_fd);
  EXPECT_FALSE(IsOpen(old_fd));
  EXPECT_TRUE(IsOpen(new_fd));
  EXPECT_EQ(owned.get(), new_fd);
}

// Closed once: a number the kernel hands out again after the close belongs
// to its new owner, and the old ScopedFd's end must not close it.
TEST(ScopedFdTest, ClosesOnlyOnceWhenTheNumberIsReused) {
  ScopedFd owned(OpenDevNull());
  const int fd = owned.get();
  owned.reset();
  const int reused = OpenDevNull();  // The lowest free number: fd again.
  ASSERT_EQ(reused, fd);
  owned.reset();  // Holds nothing: must not close `reused`.
  EXPECT_TRUE(IsOpen(reused));
  close(reused);
}

TEST(ScopedFdTest, CloseClosesNowAndSaysItWorked) {
  ScopedFd owned(OpenDevNull());
  const int fd = owned.get();
  EXPECT_EQ(owned.Close(), 0);
  EXPECT_FALSE(IsOpen(fd));
  EXPECT_FALSE(owned.valid());
  EXPECT_EQ(owned.Close(), 0);  // Nothing held: nothing closed.
}

// What close() failed with reaches the caller, and the ScopedFd holds
// nothing after it (Linux releases the number even then).
TEST(ScopedFdTest, CloseReportsTheErrorOfClose) {
  const int fd = OpenDevNull();
  ASSERT_GE(fd, 0);
  ASSERT_EQ(close(fd), 0);
  ScopedFd stale(fd);  // A number nobody holds: close() fails with EBADF.
  EXPECT_EQ(stale.Close(), EBADF);
  EXPECT_FALSE(stale.valid());
}

}  // namespace
}  // namespace ringside::base
