// base/file_io.h: WriteAll and ReadFull move every byte over partial
// transfers and signals, and say why and where they stopped.
#include "base/file_io.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringside::base {
namespace {

std::atomic<int> signals_handled{0};
void CountSignal(int) { signals_handled++; }

// A pipe, a SIGUSR1 handler installed without SA_RESTART (so a blocked
// write() fails with EINTR or returns short), and SIGPIPE ignored; all
// undone at the end.
class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipe2(fds_, O_CLOEXEC), 0);
    // A small pipe: the transfers below fill it many times over.
    ASSERT_GT(fcntl(fds_[1], F_SETPIPE_SZ, 4096), 0);
    struct sigaction sa = {};
    sa.sa_handler = CountSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_usr1_), 0);
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    ASSERT_EQ(sigaction(SIGPIPE, &ignore, &old_pipe_), 0);
    signals_handled = 0;
  }
  void TearDown() override {
    sigaction(SIGUSR1, &old_usr1_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }

  // Everything left in the pipe, read `piece` bytes at a time, until its
  // write end closes.
  std::string DrainInPieces(size_t piece) {
    std::string got;
    char buf[64];
    while (true) {
      const ssize_t n = read(fds_[0], buf, std::min(piece, sizeof(buf)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return got;
      got.append(buf, static_cast<size_t>(n));
    }
  }

  void CloseWriteEnd() {
    close(fds_[1]);
    fds_[1] = -1;
  }

  int fds_[2] = {-1, -1};
  struct sigaction old_usr1_ = {};
  struct sigaction old_pipe_ = {};
};

std::string Pattern(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

// Whether thread `tid` of this process is blocked in write(2).
bool BlockedInWrite(pid_t tid) {
  std::ifstream f(absl::StrCat("/proc/self/task/", tid, "/syscall"));
  long number = -1;
  return (f >> number) && number == SYS_write;
}

TEST_F(FileIoTest, WriteAllWritesEverythingOverShortWritesAndSignals) {
  const std::string data = Pattern(256 * 1024);
  std::atomic<bool> done{false};
  IoResult result;
  std::thread writer([&] {
    result = WriteAll(fds_[1], data);
    done = true;
    CloseWriteEnd();
  });
  // Interrupt the writer over and over while it fills the pipe: each signal
  // makes write() return what it had written so far (a short write), or
  // fail with EINTR when it had written nothing.
  const pthread_t handle = writer.native_handle();
  std::thread interrupter([&] {
    while (!done) {
      pthread_kill(handle, SIGUSR1);
      absl::SleepFor(absl::Microseconds(200));
    }
  });
  const std::string got = DrainInPieces(61);
  writer.join();
  interrupter.join();
  EXPECT_TRUE(result.ok()) << std::strerror(result.err);
  EXPECT_EQ(result.bytes, data.size());
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "the bytes arrived changed or out of order";
  EXPECT_GT(signals_handled.load(), 0);
}

TEST_F(FileIoTest, WriteAllRetriesAWriteThatFailedWithEintr) {
  // Fill the pipe, so that the writer blocks before writing a byte: the
  // signal then makes write() fail with EINTR rather than return short.
  ASSERT_EQ(fcntl(fds_[1], F_SETFL, O_NONBLOCK), 0);
  std::string filler;
  const std::string chunk(512, 'f');
  while (true) {
    const ssize_t n = write(fds_[1], chunk.data(), chunk.size());
    if (n <= 0) break;
    filler.append(chunk, 0, static_cast<size_t>(n));
  }
  ASSERT_EQ(fcntl(fds_[1], F_SETFL, 0), 0);
  const std::string data = Pattern(10000);
  std::atomic<pid_t> tid{0};
  IoResult result;
  std::thread writer([&] {
    tid = gettid();
    result = WriteAll(fds_[1], data);
    CloseWriteEnd();
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (tid == 0 || !BlockedInWrite(tid)) {
    ASSERT_LT(absl::Now(), deadline) << "the writer never blocked in write()";
    absl::SleepFor(absl::Milliseconds(1));
  }
  pthread_kill(writer.native_handle(), SIGUSR1);
  while (signals_handled == 0) {
    ASSERT_LT(absl::Now(), deadline) << "the signal never arrived";
    absl::SleepFor(absl::Milliseconds(1));
  }
  const std::string got = DrainInPieces(17);
  writer.join();
  EXPECT_TRUE(result.ok()) << std::strerror(result.err);
  EXPECT_EQ(result.bytes, data.size());
  EXPECT_TRUE(got == filler + data);
}

TEST_F(FileIoTest, WriteAllReportsTheErrnoAndWhatWentOut) {
  close(fds_[0]);
  fds_[0] = -1;
  const IoResult result = WriteAll(fds_[1], "lost");
  EXPECT_EQ(result.err, EPIPE);
  EXPECT_EQ(result.bytes, 0u);
  EXPECT_FALSE(result.ok());
}

TEST(FileIoFileTest, WriteAllAtWritesAtTheOffsetAndLeavesTheFileOffset) {
  char path[] = "/tmp/file_io_test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ASSERT_TRUE(WriteAll(fd, "0123456789").ok());
  const IoResult r = WriteAllAt(fd, "ab", 3);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.bytes, 2u);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 10);
  char buf[16] = {};
  ASSERT_EQ(pread(fd, buf, sizeof(buf), 0), 10);
  EXPECT_STREQ(buf, "012ab56789");
  close(fd);
}

TEST_F(FileIoTest, ReadFullStopsAtEndOfFileWithoutAnError) {
  ASSERT_TRUE(WriteAll(fds_[1], "12345").ok());
  CloseWriteEnd();
  char buf[10];
  const IoResult r = ReadFull(fds_[0], buf, sizeof(buf));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.bytes, 5u);
  EXPECT_EQ(std::string(buf, r.bytes), "12345");
  EXPECT_EQ(ReadFull(fds_[0], buf, sizeof(buf)).bytes, 0u);
}

TEST_F(FileIoTest, ReadFullGathersShortReadsUntilItHasAll) {
  const std::string data = Pattern(3000);
  std::thread writer([&] {
    for (size_t i = 0; i < data.size(); i += 100) {
      if (write(fds_[1], data.data() + i, 100) != 100) break;
      absl::SleepFor(absl::Microseconds(100));
    }
  });
  std::string buf(data.size(), '\0');
  const IoResult r = ReadFull(fds_[0], buf.data(), buf.size());
  writer.join();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.bytes, data.size());
  EXPECT_TRUE(buf == data);
}

TEST(RetryOnEintrTest, RetriesWhileTheCallFailsWithEintr) {
  int calls = 0;
  const int result = RetryOnEintr([&] {
    if (++calls < 3) {
      errno = EINTR;
      return -1;
    }
    return 7;
  });
  EXPECT_EQ(result, 7);
  EXPECT_EQ(calls, 3);
  calls = 0;
  EXPECT_EQ(RetryOnEintr([&] {
              ++calls;
              errno = EBADF;
              return -1;
            }),
            -1);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ringside::base
