#include "agent/cli/record_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "base/scoped_fd.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

TEST(RecordChildTest, CheckCommandLooksUpCmdAsAShellWould) {
  std::string why;
  EXPECT_EQ(CheckCommand("sh", &why), 0);
  EXPECT_EQ(CheckCommand("/bin/sh", &why), 0);

  EXPECT_EQ(CheckCommand("ringside-no-such-command", &why), 127);
  EXPECT_EQ(why, "command not found");
  EXPECT_EQ(CheckCommand("/nonexistent/sh", &why), 127);

  ScratchDir dir;
  EXPECT_EQ(CheckCommand(dir.path(), &why), 126);
  EXPECT_EQ(why, "is a directory");
  const std::string plain = dir.Join("not-executable");
  base::ScopedFd fd(open(plain.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd);
  EXPECT_EQ(CheckCommand(plain, &why), 126);
  EXPECT_EQ(why, "permission denied");
}

TEST(RecordChildTest, SpawnCommandStartsCmdOrSaysWhyItCouldNot) {
  int err = 0;
  const pid_t pid = SpawnCommand({"/bin/sh", "-c", "exit 3"}, &err);
  ASSERT_GT(pid, 0) << strerror(err);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(DescribeExit(status), "command exited with status 3");

  EXPECT_EQ(SpawnCommand({"/nonexistent/ringside-cmd"}, &err), -1);
  EXPECT_EQ(err, ENOENT);
}

// An executable script without "#!" runs in the shell, as execvp() (and a
// shell) would run it, with its arguments.
TEST(RecordChildTest, SpawnCommandRunsAScriptWithoutInterpreterInTheShell) {
  ScratchDir dir;
  const std::string script = dir.Join("no-shebang");
  std::ofstream(script) << "exit $1\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  int err = 0;
  const pid_t pid = SpawnCommand({script, "5"}, &err);
  ASSERT_GT(pid, 0) << strerror(err);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(DescribeExit(status), "command exited with status 5");
}

// The command never holds a copy of the recording's memory: after it has
// started, the recording writes its (already populated) ring without a page
// fault per page, which a fork() would cost (every private page made
// copy-on-write, a fault on each one's next write: 11 us each on a VM).
TEST(RecordChildTest, SpawnCommandLeavesTheRecordingsPagesWritable) {
  constexpr size_t kBytes = 16 << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* ring = static_cast<volatile uint8_t*>(mapped);
  for (size_t i = 0; i < kBytes; i += page) ring[i] = 1;  // Populated, as a session's ring.

  int err = 0;
  const pid_t pid = SpawnCommand({"/bin/sh", "-c", "exit 0"}, &err);
  ASSERT_GT(pid, 0) << strerror(err);
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  for (size_t i = 0; i < kBytes; i += page) ring[i] = 2;
  getrusage(RUSAGE_THREAD, &after);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  munmap(mapped, kBytes);
  const long pages = static_cast<long>(kBytes / page);
  EXPECT_LT(after.ru_minflt - before.ru_minflt, pages / 16)
      << "page faults writing " << pages << " pages after the command started";
}

TEST(RecordChildTest, DescribeExitNamesTheStatusOrTheSignal) {
  EXPECT_EQ(DescribeExit(W_EXITCODE(7, 0)), "command exited with status 7");
  EXPECT_EQ(DescribeExit(SIGKILL), "command killed by signal 9 (Killed)");
}

TEST(RecordChildTest, StopCommandEndsCmdWithTheSignalGiven) {
  int err = 0;
  const pid_t pid = SpawnCommand({"sleep", "30"}, &err);
  ASSERT_GT(pid, 0) << strerror(err);
  sigset_t none;
  sigemptyset(&none);
  const int status = StopCommand(pid, "sleep", SIGINT, none, absl::Seconds(30), false);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

// A CMD that ignores the signal (a trap, nohup) is killed once the grace
// time has passed.
TEST(RecordChildTest, StopCommandKillsACmdThatIgnoresTheSignal) {
  ScratchDir dir;
  const std::string trapped = dir.Join("trapped");
  int err = 0;
  const pid_t pid =
      SpawnCommand({"/bin/sh", "-c", "trap '' TERM; touch " + trapped + "; exec sleep 30"}, &err);
  ASSERT_GT(pid, 0) << strerror(err);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (access(trapped.c_str(), F_OK) != 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(access(trapped.c_str(), F_OK), 0) << "the command never set its trap";
  sigset_t none;
  sigemptyset(&none);
  const absl::Time start = absl::Now();
  const int status = StopCommand(pid, "sleep", SIGTERM, none, absl::Milliseconds(300), false);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
}

}  // namespace
}  // namespace ringside::agent
