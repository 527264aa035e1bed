#include "agent/lifecycle/agent_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

mode_t TypeOf(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

// Runs `body` in a forked child and returns what it returned. `body` must
// not depend on other threads (there may have been some before fork()).
std::string InChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe2 failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string out = body();
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

class AgentLockTest : public ::testing::Test {
 protected:
  ScratchDir scratch_;
  const std::string run_dir_ = scratch_.Join("run");
  const std::string lock_path_ = run_dir_ + "/agent.lock";
};

TEST_F(AgentLockTest, AcquireWritesPidAndSocket) {
  absl::StatusOr<std::unique_ptr<AgentLock>> lock =
      AgentLock::Acquire(run_dir_, "/run/ringside/control.sock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ((*lock)->path(), lock_path_);
  EXPECT_EQ(ReadFile(lock_path_),
            absl::StrCat("pid ", getpid(), "\nsocket /run/ringside/control.sock\n"));
  absl::StatusOr<AgentLock::Holder> holder = ReadLockHolder(lock_path_);
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->pid, getpid());
  EXPECT_EQ(holder->socket, "/run/ringside/control.sock");
}

TEST_F(AgentLockTest, LockFileIsMode0644) {
  const mode_t old_umask = umask(077);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  umask(old_umask);
  ASSERT_TRUE(lock.ok()) << lock.status();
  struct stat st;
  ASSERT_EQ(stat(lock_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST_F(AgentLockTest, SecondAcquireInTheSameProcessNamesTheHolder) {
  absl::StatusOr<std::unique_ptr<AgentLock>> first = AgentLock::Acquire(run_dir_, "/a.sock");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<AgentLock>> second = AgentLock::Acquire(run_dir_, "/b.sock");
  ASSERT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_EQ(second.status().message(),
            absl::StrCat("another ringside agent is running: pid ", getpid(),
                         ", control socket /a.sock (lock file ", lock_path_, ")"));
  // The holder's file is left as it was.
  EXPECT_THAT(ReadFile(lock_path_), HasSubstr("socket /a.sock\n"));
}

TEST_F(AgentLockTest, SecondAcquireFromAnotherProcessNamesTheHolder) {
  absl::StatusOr<std::unique_ptr<AgentLock>> first = AgentLock::Acquire(run_dir_, "/a.sock");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string child_saw = InChild([&] {
    absl::StatusOr<std::unique_ptr<AgentLock>> second = AgentLock::Acquire(run_dir_, "/b.sock");
    return second.ok() ? std::string("acquired")
                       : absl::StrCat(absl::StatusCodeToString(second.status().code()), ": ",
                                      second.status().message());
  });
  EXPECT_EQ(child_saw,
            absl::StrCat("ALREADY_EXISTS: another ringside agent is running: pid ", getpid(),
                         ", control socket /a.sock (lock file ", lock_path_, ")"));
}

TEST_F(AgentLockTest, LockHeldWithoutContentsSaysItCannotNameTheHolder) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  const int fd = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  close(fd);
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kAlreadyExists) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr("does not name its pid"));
  EXPECT_THAT(lock.status().message(), HasSubstr(lock_path_));
}

TEST_F(AgentLockTest, LockOfAKilledAgentIsTakenOverAndReported) {
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/old.sock");
    (void)!write(ready[1], lock.ok() ? "y" : "n", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char acquired = 0;
  ASSERT_EQ(read(ready[0], &acquired, 1), 1);
  close(ready[0]);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(acquired, 'y');
  ASSERT_TRUE(Exists(lock_path_)) << "a killed agent cannot clean up";

  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/new.sock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE((*lock)->stale_holder().has_value());
  EXPECT_EQ((*lock)->stale_holder()->pid, child);
  EXPECT_EQ((*lock)->stale_holder()->socket, "/old.sock");
  EXPECT_EQ(ReadFile(lock_path_), absl::StrCat("pid ", getpid(), "\nsocket /new.sock\n"));
}

TEST_F(AgentLockTest, UnlockedFileNamingADeadPidIsTakenOverAndReported) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  WriteFile(lock_path_, "pid 2147483646\nsocket /dead.sock\n");
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE((*lock)->stale_holder().has_value());
  EXPECT_EQ((*lock)->stale_holder()->pid, 2147483646);
  EXPECT_EQ((*lock)->stale_holder()->socket, "/dead.sock");
}

TEST_F(AgentLockTest, RunDirOthersCanWriteIsRefused) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(run_dir_.c_str(), 01777), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr("can be written by others (mode 1777)"));
  struct stat st;
  EXPECT_NE(lstat(lock_path_.c_str(), &st), 0) << "a lock file was created";
}

TEST_F(AgentLockTest, RunDirOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "giving the directory to another uid needs root (CAP_CHOWN)";
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  ASSERT_EQ(chown(run_dir_.c_str(), 65534, 65534), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr("belongs to uid 65534"));
}

// A lock file planted as a hard link to some other file: that file must
// not be truncated or written.
TEST_F(AgentLockTest, LockFileThatIsAHardLinkIsLeftAlone) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  const std::string other = scratch_.Join("someone-elses-file");
  WriteFile(other, "precious\n");
  ASSERT_EQ(link(other.c_str(), lock_path_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr("2 links"));
  EXPECT_EQ(ReadFile(other), "precious\n");
}

TEST_F(AgentLockTest, NewLockFileHasNoStaleHolder) {
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_FALSE((*lock)->stale_holder().has_value());
}

TEST_F(AgentLockTest, EmptyLeftoverFileHasNoStaleHolder) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  WriteFile(lock_path_, "");
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_FALSE((*lock)->stale_holder().has_value());
}

TEST_F(AgentLockTest, DestructorRemovesTheLockFile) {
  {
    absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
    ASSERT_TRUE(lock.ok()) << lock.status();
    ASSERT_TRUE(Exists(lock_path_));
  }
  EXPECT_FALSE(Exists(lock_path_));
}

TEST_F(AgentLockTest, NextAgentAcquiresAfterTheDestructor) {
  {
    absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
    ASSERT_TRUE(lock.ok()) << lock.status();
  }
  absl::StatusOr<std::unique_ptr<AgentLock>> next = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE((*next)->stale_holder().has_value()) << "a clean exit leaves nothing stale";
}

TEST_F(AgentLockTest, DestructorLeavesAFileThatIsNoLongerOursAlone) {
  {
    absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
    ASSERT_TRUE(lock.ok()) << lock.status();
    ASSERT_EQ(unlink(lock_path_.c_str()), 0);
    WriteFile(lock_path_, "pid 7\nsocket /other.sock\n");
  }
  EXPECT_EQ(ReadFile(lock_path_), "pid 7\nsocket /other.sock\n");
}

// An agent exiting unlinks its file while we have it open but not yet
// locked: our flock then succeeds on an orphan inode, which must not count
// as holding the lock.
TEST_F(AgentLockTest, LockFileUnlinkedBetweenOpenAndFlockIsReopened) {
  std::optional<absl::StatusOr<std::unique_ptr<AgentLock>>> exiting =
      AgentLock::Acquire(run_dir_, "/exiting.sock");
  ASSERT_TRUE(exiting->ok()) << exiting->status();
  int opens = 0;
  absl::StatusOr<std::unique_ptr<AgentLock>> lock =
      AgentLock::AcquireForTesting(run_dir_, "/s", [&] {
        if (++opens == 1) exiting.reset();
      });
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(opens, 2);
  EXPECT_EQ(ReadFile(lock_path_), absl::StrCat("pid ", getpid(), "\nsocket /s\n"));
  absl::StatusOr<std::unique_ptr<AgentLock>> third = AgentLock::Acquire(run_dir_, "/third.sock");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kAlreadyExists) << third.status();
}

TEST_F(AgentLockTest, MissingRunDirIsCreatedWithMode0755) {
  const mode_t old_umask = umask(077);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  umask(old_umask);
  ASSERT_TRUE(lock.ok()) << lock.status();
  struct stat st;
  ASSERT_EQ(lstat(run_dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(AgentLockTest, RunDirWhoseParentIsMissingIsNotCreated) {
  const std::string deep = scratch_.Join("missing/run");
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(deep, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kNotFound) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(deep));
  EXPECT_FALSE(Exists(scratch_.Join("missing")));
}

TEST_F(AgentLockTest, RunDirSymlinkIsRefusedAndLeftUntouched) {
  const std::string target = scratch_.Join("target");
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), run_dir_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(run_dir_ + " is a symlink"));
  EXPECT_EQ(TypeOf(run_dir_), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(std::filesystem::read_symlink(run_dir_), target);
  EXPECT_FALSE(Exists(target + "/agent.lock"));
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(AgentLockTest, DanglingRunDirSymlinkIsRefusedAndNothingCreated) {
  const std::string target = scratch_.Join("nowhere");
  ASSERT_EQ(symlink(target.c_str(), run_dir_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(run_dir_ + " is a symlink"));
  EXPECT_FALSE(Exists(target));
}

TEST_F(AgentLockTest, RunDirThatIsAFileIsRefused) {
  WriteFile(run_dir_, "not a directory");
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(run_dir_ + " is a regular file"));
  EXPECT_EQ(ReadFile(run_dir_), "not a directory");
}

TEST_F(AgentLockTest, LockPathSymlinkIsRefusedAndItsTargetUntouched) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  const std::string victim = scratch_.Join("victim");
  WriteFile(victim, "keep me");
  ASSERT_EQ(symlink(victim.c_str(), lock_path_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(lock_path_ + " is a symlink"));
  EXPECT_EQ(TypeOf(lock_path_), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(ReadFile(victim), "keep me");
}

TEST_F(AgentLockTest, DanglingLockPathSymlinkCreatesNothing) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  const std::string target = scratch_.Join("created-through-link");
  ASSERT_EQ(symlink(target.c_str(), lock_path_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_FALSE(Exists(target));
}

TEST_F(AgentLockTest, LockPathDirectoryIsRefusedAndLeftUntouched) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(lock_path_.c_str(), 0700), 0);
  WriteFile(lock_path_ + "/inside", "x");
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(lock_path_ + " is a directory"));
  EXPECT_EQ(ReadFile(lock_path_ + "/inside"), "x");
}

TEST_F(AgentLockTest, LockPathFifoIsRefusedWithoutOpeningIt) {
  ASSERT_EQ(mkdir(run_dir_.c_str(), 0755), 0);
  ASSERT_EQ(mkfifo(lock_path_.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/s");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_THAT(lock.status().message(), HasSubstr(lock_path_ + " is a FIFO"));
  EXPECT_EQ(TypeOf(lock_path_), static_cast<mode_t>(S_IFIFO));
}

TEST_F(AgentLockTest, SocketPathWithANewlineIsRejected) {
  absl::StatusOr<std::unique_ptr<AgentLock>> lock = AgentLock::Acquire(run_dir_, "/a\npid 1");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kInvalidArgument) << lock.status();
  EXPECT_FALSE(Exists(run_dir_));
}

TEST(ReadLockHolderTest, MissingFileIsNotFound) {
  ScratchDir scratch;
  EXPECT_EQ(ReadLockHolder(scratch.Join("agent.lock")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReadLockHolderTest, EmptyFileIsNotFound) {
  ScratchDir scratch;
  WriteFile(scratch.Join("agent.lock"), "");
  EXPECT_EQ(ReadLockHolder(scratch.Join("agent.lock")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReadLockHolderTest, FileWithoutAPidIsDataLoss) {
  ScratchDir scratch;
  WriteFile(scratch.Join("agent.lock"), "socket /s\n");
  absl::StatusOr<AgentLock::Holder> holder = ReadLockHolder(scratch.Join("agent.lock"));
  EXPECT_EQ(holder.status().code(), absl::StatusCode::kDataLoss) << holder.status();
  EXPECT_THAT(holder.status().message(), HasSubstr(scratch.Join("agent.lock")));
}

TEST(ParseLockHolderTest, AcceptsPidAndSocketAndIgnoresUnknownLines) {
  std::optional<AgentLock::Holder> holder =
      ParseLockHolder("pid 42\nversion 9\nsocket /run/x.sock\n");
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 42);
  EXPECT_EQ(holder->socket, "/run/x.sock");
}

TEST(ParseLockHolderTest, RejectsBadPids) {
  EXPECT_FALSE(ParseLockHolder("pid abc\n").has_value());
  EXPECT_FALSE(ParseLockHolder("pid -1\n").has_value());
  EXPECT_FALSE(ParseLockHolder("pid 0\n").has_value());
  EXPECT_FALSE(ParseLockHolder("pid 99999999999999999999\n").has_value());
  EXPECT_FALSE(ParseLockHolder(std::string("pid \0\xff 12", 9)).has_value());
  EXPECT_FALSE(ParseLockHolder("socket /s\n").has_value());
}

}  // namespace
}  // namespace ringside::agent
