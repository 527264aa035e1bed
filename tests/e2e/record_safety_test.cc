// `ringside record` runs as root: what -o may replace, how it ends, and what
// it says at the end. Device nodes are made in scratch directories of the
// test's own, never on the real /dev.

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

using testing::RunRingside;
using testing::RunRingsideCaptureStderr;
using testing::TempPath;

// A short recording that needs no kernel source: fast, and the same with or
// without privilege.
constexpr char kProcOnlyConfig[] = "buffers { size_kb: 1024 }\nduration_ms: 200\n";

class RecordSafetyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("safety");
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0) << std::strerror(errno);
    config_ = dir_ + "/proc.pbtxt";
    std::ofstream(config_) << kProcOnlyConfig;
  }
  void TearDown() override { (void)!system(("rm -rf '" + dir_ + "'").c_str()); }

  // Records into `out`; returns the exit status and stderr in *err.
  int Record(const std::string& out, std::string* err) {
    int code = -1;
    *err = RunRingsideCaptureStderr({"record", "-c", config_, "-o", out}, &code);
    return code;
  }

  std::string dir_, config_;
};

bool IsTrace(const std::string& path) {
  const trace::Trace t = testing::ReadTraceFile(path);
  return t.packet_size() > 3 && t.packet(t.packet_size() - 1).service_event().tracing_disabled();
}

TEST_F(RecordSafetyTest, DevicesSocketsAndDirectoriesAreRefusedAndLeftAsTheyWere) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_MKNOD) to make a device node";
  const std::string dev = dir_ + "/null";
  ASSERT_EQ(mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
  const std::string sock = dir_ + "/sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  struct Case {
    std::string path;
    const char* says;
    mode_t type;
  };
  for (const Case& c :
       {Case{dev, "is a character device", S_IFCHR}, Case{sock, "is a socket", S_IFSOCK},
        Case{dir_, "is a directory", S_IFDIR}}) {
    std::string err;
    EXPECT_EQ(Record(c.path, &err), 1) << c.path;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    struct stat st;
    ASSERT_EQ(lstat(c.path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & S_IFMT, c.type) << c.path << " was replaced";
  }
  close(fd);
}

TEST_F(RecordSafetyTest, KernelFilesystemsAreRefused) {
  std::string err;
  EXPECT_EQ(Record("/proc/sys/kernel/ringside-test.pftrace", &err), 1);
  EXPECT_NE(err.find("is on proc"), std::string::npos) << err;
  EXPECT_EQ(Record("/sys/kernel/ringside-test.pftrace", &err), 1);
  EXPECT_NE(err.find("is on sysfs"), std::string::npos) << err;
}

// A symlink is followed: the file it points to gets the trace, the link
// stays a link.
TEST_F(RecordSafetyTest, ASymlinkIsFollowedToItsTarget) {
  const std::string target = dir_ + "/target.pftrace", link = dir_ + "/link.pftrace";
  std::ofstream(target) << "old";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  std::string err;
  ASSERT_EQ(Record(link, &err), 0) << err;
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_TRUE(IsTrace(target));
  // Dangling: refused, nothing created.
  const std::string dangling = dir_ + "/dangling.pftrace";
  ASSERT_EQ(symlink((dir_ + "/nowhere").c_str(), dangling.c_str()), 0);
  EXPECT_EQ(Record(dangling, &err), 1);
  EXPECT_NE(err.find("symlink"), std::string::npos) << err;
  EXPECT_NE(err.find("which does not exist; ringside creates no file through a link"),
            std::string::npos)
      << err;
  EXPECT_NE(lstat((dir_ + "/nowhere").c_str(), &st), 0);
}

TEST_F(RecordSafetyTest, DashOWritesTheTraceToStandardOutput) {
  const std::string out = dir_ + "/stdout.pftrace";
  const std::string& bin = ringside::testing::RingsideBinary();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDOUT_FILENO);
    execl(bin.c_str(), "ringside", "record", "-c", config_.c_str(), "-o", "-",
          static_cast<char*>(nullptr));
    _exit(126);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(IsTrace(out));
}

// `-o >(cmd)` and `-o /dev/fd/N`: a pipe is written in order, never renamed.
TEST_F(RecordSafetyTest, APipeByDevFdIsWrittenAsAStream) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const std::string& bin = ringside::testing::RingsideBinary();
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (p[1] != 5) {
      dup2(p[1], 5);
      close(p[1]);
    }
    freopen("/dev/null", "w", stderr);
    execl(bin.c_str(), "ringside", "record", "-c", config_.c_str(), "-o", "/dev/fd/5",
          static_cast<char*>(nullptr));
    _exit(126);
  }
  close(p[1]);
  std::string bytes;
  char buf[65536];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof(buf))) > 0) bytes.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(bytes));
  ASSERT_GT(t.packet_size(), 3);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
}

TEST_F(RecordSafetyTest, ANameTooLongFailsBeforeRecording) {
  std::string err;
  EXPECT_EQ(Record(dir_ + "/" + std::string(300, 'x'), &err), 1);
  EXPECT_NE(err.find("File name too long"), std::string::npos) << err;
}

// The space a whole-file trace needs is reserved before recording: a disk
// too small fails at once, not after the recording.
TEST_F(RecordSafetyTest, ADiskTooSmallForTheBuffersFailsBeforeRecording) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_SYS_ADMIN) to mount a tmpfs";
  const std::string mnt = dir_ + "/small";
  ASSERT_EQ(mkdir(mnt.c_str(), 0700), 0);
  const std::string err_copy = dir_ + "/err";
  const pid_t pid = fork();
  if (pid == 0) {
    // Mounted in a mount namespace of the child's own: nobody else sees it.
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        mount("ringside-test", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) {
      _exit(100);
    }
    int code = -1;
    const std::string err = RunRingsideCaptureStderr(
        {"record", "-c", config_, "-b", "64M", "--duration", "30s", "-o", mnt + "/t.pftrace"},
        &code);
    std::ofstream(err_copy) << err;
    struct stat st;
    _exit(stat((mnt + "/t.pftrace").c_str(), &st) == 0 ? 101 : code);
  }
  const absl::Time start = absl::Now();
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_NE(WEXITSTATUS(status), 100) << "cannot mount a tmpfs in a mount namespace of our own";
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  std::ifstream in(err_copy);
  const std::string err((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(err.find("has not that much room"), std::string::npos) << err;
}

TEST_F(RecordSafetyTest, SighupEndsTheRecordingWithACompleteFile) {
  const std::string out = dir_ + "/hup.pftrace";
  pid_t pid = 0;
  RunRingside({"record", "-c", config_, "--duration", "60s", "-o", out}, &pid, /*wait=*/false);
  sleep(1);
  ASSERT_EQ(kill(pid, SIGHUP), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(IsTrace(out));
}

TEST_F(RecordSafetyTest, ACommandThatCannotRunFailsAtOnceWithNoTrace) {
  const std::string out = dir_ + "/none.pftrace";
  int code = -1;
  std::string err =
      RunRingsideCaptureStderr({"record", "-c", config_, "-o", out, "--", "/nonexistent"}, &code);
  EXPECT_EQ(code, 127);
  EXPECT_NE(err.find("cannot run /nonexistent"), std::string::npos) << err;
  err = RunRingsideCaptureStderr({"record", "-c", config_, "-o", out, "--", dir_}, &code);
  EXPECT_EQ(code, 126);
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0);
}

TEST_F(RecordSafetyTest, TheSummaryGivesTheCommandsExitStatusOrSignal) {
  const std::string out = dir_ + "/cmd.pftrace";
  int code = -1;
  std::string err = RunRingsideCaptureStderr(
      {"record", "-c", config_, "-o", out, "--", "/bin/sh", "-c", "exit 3"}, &code);
  EXPECT_EQ(code, 3);
  EXPECT_NE(err.find("command exited with status 3"), std::string::npos) << err;
  err = RunRingsideCaptureStderr(
      {"record", "-c", config_, "-o", out, "--", "/bin/sh", "-c", "kill -KILL $$"}, &code);
  EXPECT_EQ(code, 128 + SIGKILL);
  EXPECT_NE(err.find("command killed by signal 9"), std::string::npos) << err;
}

// With both, the first of --duration and CMD ends the recording.
TEST_F(RecordSafetyTest, DurationEndsARecordingWhoseCommandRunsLonger) {
  const std::string out = dir_ + "/dur.pftrace";
  const absl::Time start = absl::Now();
  int code = -1;
  const std::string err = RunRingsideCaptureStderr(
      {"record", "-c", config_, "--duration", "500ms", "-o", out, "--", "sleep", "30"}, &code);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("duration reached; command killed by signal 15"), std::string::npos) << err;
  EXPECT_TRUE(IsTrace(out));
}

// `record ... 2>&1 | head -1`: the reader of the summary goes away; the
// recording's exit status stays that of a file written.
TEST_F(RecordSafetyTest, AClosedPipeOnTheSummaryDoesNotChangeTheExitStatus) {
  const std::string out = dir_ + "/pipe.pftrace";
  const std::string cmd = absl::StrCat(ringside::testing::RingsideBinary(), " record -c ", config_,
                                       " -o ", out, " 2>&1 | true; exit ${PIPESTATUS[0]}");
  const int status = system(("bash -c '" + cmd + "'").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(IsTrace(out));
}

// The closing lines count what the file holds and each loss, with the
// setting that would have kept it.
TEST_F(RecordSafetyTest, TheSummaryCountsEventsKeptAndWhatDiscardRefused) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = dir_ + "/discard.pbtxt";
  std::ofstream(cfg) << "buffers { size_kb: 64 fill_policy: DISCARD }\n"
                        "data_sources { config { name: \"linux.bpf\" } }\n";
  const std::string out = dir_ + "/discard.pftrace";
  int code = -1;
  const std::string err =
      RunRingsideCaptureStderr({"record", "-c", cfg, "-o", out, "--", "/bin/sh", "-c",
                                "i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done"},
                               &code);
  EXPECT_EQ(code, 0) << err;
  const trace::Trace t = testing::ReadTraceFile(out);
  uint64_t events = 0, discarded = 0;
  for (const trace::TracePacket& p : t.packet()) {
    events += static_cast<uint64_t>(p.ftrace_events().event_size() +
                                    p.ftrace_events().compact_sched().switch_timestamp_size() +
                                    p.ftrace_events().compact_sched().waking_timestamp_size());
    for (const auto& b : p.trace_stats().buffer_stats()) discarded += b.chunks_discarded();
  }
  ASSERT_GT(discarded, 0u) << "the buffer did not fill";
  EXPECT_NE(err.find(absl::StrCat(events, " events kept of ")), std::string::npos) << events << "\n"
                                                                                   << err;
  EXPECT_NE(err.find(absl::StrCat("lost ", discarded, " chunks refused by the full DISCARD")),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("buffers.size_kb"), std::string::npos) << err;
}

// -e adds ftrace events (with a filter) to a -c config; -b sets its buffer.
TEST_F(RecordSafetyTest, EventAndBufferFlagsComposeWithAConfig) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string cfg = dir_ + "/ftrace.pbtxt";
  std::ofstream(cfg) << "buffers { size_kb: 1024 }\n"
                        "data_sources { config { name: \"linux.ftrace\" ftrace_config { "
                        "ftrace_events: \"sched/sched_process_exit\" } } }\n";
  const std::string out = dir_ + "/events.pftrace";
  int code = -1;
  const std::string err = RunRingsideCaptureStderr(
      {"record", "-c", cfg, "-o", out, "-b", "2M", "-e", "signal:signal_generate/sig == 10/", "--",
       "/bin/sh", "-c", "sleep 5 & kill -USR2 $!; sleep 5 & kill -USR1 $!; wait"},
      &code);
  EXPECT_EQ(code, 0) << err;
  const trace::Trace t = testing::ReadTraceFile(out);
  int usr1 = 0, other_signals = 0, exits = 0;
  uint64_t buffer_size = 0;
  for (const trace::TracePacket& p : t.packet()) {
    for (const trace::FtraceEvent& e : p.ftrace_events().event()) {
      if (e.generic().event_name() != "signal_generate") continue;
      for (const auto& f : e.generic().field()) {
        if (f.name() == "sig") (f.int_value() == SIGUSR1 ? usr1 : other_signals)++;
      }
    }
    for (const trace::FtraceEvent& e : p.ftrace_events().event())
      exits += e.has_sched_process_exit();
    for (const auto& b : p.trace_stats().buffer_stats()) buffer_size = b.buffer_size();
  }
  EXPECT_GE(usr1, 1);
  EXPECT_EQ(other_signals, 0) << "the filter sig == 10 was not applied";
  EXPECT_GE(exits, 2);  // The config's own event.
  EXPECT_EQ(buffer_size, 2u << 20);
}

TEST(InspectCommandTest, AnEmptyFileIsAnError) {
  const std::string empty = TempPath("empty.pftrace");
  std::ofstream(empty).close();
  int code = -1;
  const std::string err = RunRingsideCaptureStderr({"inspect", empty}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("the file is empty"), std::string::npos) << err;
  unlink(empty.c_str());
}

TEST(ListCommandTest, ListsBpfSourcesAndTheKernelsEventsWithFields) {
  int code = -1;
  std::string out = testing::RunRingsideCapture({"list", "bpf:*"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("bpf:sched"), std::string::npos) << out;
  EXPECT_NE(out.find("bpf:incidents"), std::string::npos) << out;
  RINGSIDE_REQUIRE_TRACEFS();
  out = testing::RunRingsideCapture({"list", "-v", "sched:sched_switch"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("sched:sched_switch"), std::string::npos) << out;
  EXPECT_NE(out.find("prev_state"), std::string::npos) << out;  // A field, under -v.
  EXPECT_EQ(out.find("bpf:sched"), std::string::npos) << out;
  testing::RunRingsideCapture({"list", "nosuchgroup:*"}, &code);
  EXPECT_EQ(code, 1);
}

}  // namespace
}  // namespace ringside::agent
