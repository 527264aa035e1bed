#include "tests/agent/testing/ringside_cli.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>

#include "agent/tracefile/trace_file_reader.h"
#include "gtest/gtest.h"
#include "tests/testing/paths.h"

namespace ringside::agent::testing {
namespace {

const std::string& Binary() {
  static const std::string* bin = new std::string(ringside::testing::RingsideBinary());
  return *bin;
}

// Starts `binary` with stdout to `stdout_fd` and stderr to `stderr_fd`
// (-1: /dev/null), as user `uid` (-1: ours).
pid_t StartProgram(const std::string& binary, const std::vector<std::string>& args, int stdout_fd,
                   int stderr_fd = -1, uid_t uid = static_cast<uid_t>(-1)) {
  // Everything the child needs is made before fork(): a child of a threaded
  // process (a test's agent, listener or storm threads) may call only
  // async-signal-safe functions before exec, or wait forever on a lock
  // another thread held at the fork (an allocator's, a FILE's).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid == 0) {
    for (auto [fd, target] : {std::pair{stdout_fd, STDOUT_FILENO}, {stderr_fd, STDERR_FILENO}}) {
      if (dup2(fd >= 0 ? fd : null_fd, target) < 0) _exit(125);
    }
    if (uid != static_cast<uid_t>(-1)) {
      if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(125);
    }
    execv(binary.c_str(), argv.data());
    _exit(126);
  }
  if (null_fd >= 0) close(null_fd);
  return pid;
}

pid_t Start(const std::vector<std::string>& args, int stdout_fd, int stderr_fd = -1,
            uid_t uid = static_cast<uid_t>(-1)) {
  return StartProgram(Binary(), args, stdout_fd, stderr_fd, uid);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace

namespace {

// Every path TempPath handed out, removed when the binary's tests end: a
// test that returns early (a failed ASSERT) skips its own unlink, and they
// piled up in /tmp (199 after one day of runs).
std::set<std::string>& PathsHandedOut() {
  static std::set<std::string> paths;
  return paths;
}

class RemoveTempPaths : public ::testing::Environment {
 public:
  void TearDown() override {
    if (getpid() != owner_) return;  // A forked child that ran the tests on.
    for (const std::string& path : PathsHandedOut()) unlink(path.c_str());
  }

 private:
  const pid_t owner_ = getpid();
};
::testing::Environment* const kRemoveTempPaths =
    ::testing::AddGlobalTestEnvironment(new RemoveTempPaths);

}  // namespace

std::string TempPath(const std::string& name) {
  std::string path = ::testing::TempDir() + "ringside_" + std::to_string(getpid()) + "_" + name;
  PathsHandedOut().insert(path);
  return path;
}

int RunRingside(const std::vector<std::string>& args, pid_t* started, bool wait) {
  const pid_t pid = Start(args, -1);
  if (started) *started = pid;
  return wait ? Reap(pid) : 0;
}

std::string RunRingsideCapture(const std::vector<std::string>& args, int* exit_code) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = Start(args, fds[1]);
  close(fds[1]);
  std::string out = ReadAll(fds[0]);
  *exit_code = Reap(pid);
  return out;
}

std::string RunProgramCapture(const std::string& binary, const std::vector<std::string>& args,
                              int* exit_code) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = StartProgram(binary, args, fds[1]);
  close(fds[1]);
  std::string out = ReadAll(fds[0]);
  *exit_code = Reap(pid);
  return out;
}

std::string RunRingsideCaptureStderr(const std::vector<std::string>& args, int* exit_code,
                                     uid_t uid) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = Start(args, -1, fds[1], uid);
  close(fds[1]);
  std::string err = ReadAll(fds[0]);
  *exit_code = Reap(pid);
  return err;
}

trace::Trace ReadTraceFile(const std::string& path) {
  trace::Trace t;
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return t;
  std::string packet;
  uint64_t offset = 0;
  for (;;) {
    const TraceFileReader::Result r = (*reader)->ReadNextPacket(&packet, &offset);
    if (r == TraceFileReader::Result::kEnd) break;
    if (r == TraceFileReader::Result::kError) {
      ADD_FAILURE() << path << ": at byte " << (*reader)->error_offset() << ": "
                    << (*reader)->error();
      break;
    }
    EXPECT_TRUE(t.add_packet()->ParseFromString(packet)) << path << ": packet at byte " << offset;
  }
  return t;
}

}  // namespace ringside::agent::testing
