// `ringside record` end to end: the real binary, the real kernel, the file.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

const std::string kBin = std::string(RINGSIDE_BUILD_DIR) + "/ringside";

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "ringside_record_" + std::to_string(getpid()) + "_" + name;
}

// Runs the binary with `args`; returns its exit status (or -signal).
int RunRingside(const std::vector<std::string>& args, pid_t* started = nullptr, bool wait = true) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kBin.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (freopen("/dev/null", "w", stderr) == nullptr) _exit(125);
    execv(kBin.c_str(), argv.data());
    _exit(126);
  }
  if (started) *started = pid;
  if (!wait) return 0;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

trace::Trace ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(bytes)) << path;
  return t;
}

TEST(RecordCommandTest, RecordsAValidSelfContainedTraceWithKernelEvents) {
  RINGSIDE_REQUIRE_TRACEFS();
  const std::string out = TempPath("basic.pftrace");
  ASSERT_EQ(RunRingside({"record", "--duration", "2s", "-o", out}), 0);
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // Traces are private by default.
  const trace::Trace t = ReadTrace(out);
  int uuid = 0, system_info = 0, clocks = 0, config = 0, trees = 0, bundles = 0, stats = 0,
      ftrace_stats = 0;
  uint64_t events = 0;
  for (const trace::TracePacket& p : t.packet()) {
    EXPECT_TRUE(p.has_trusted_packet_sequence_id());
    uuid += p.has_trace_uuid();
    system_info += p.has_system_info();
    clocks += p.has_clock_snapshot();
    config += p.has_trace_config();
    trees += p.has_process_tree();
    stats += p.has_trace_stats();
    ftrace_stats += p.has_ftrace_stats();
    if (p.has_ftrace_events()) {
      bundles++;
      events += static_cast<uint64_t>(p.ftrace_events().event_size() +
                                      p.ftrace_events().compact_sched().switch_timestamp_size());
    }
  }
  EXPECT_EQ(uuid, 1);
  EXPECT_EQ(system_info, 1);
  EXPECT_EQ(clocks, 2);
  EXPECT_EQ(config, 1);
  EXPECT_EQ(trees, 2);
  EXPECT_EQ(stats, 1);
  EXPECT_EQ(ftrace_stats, 2);
  EXPECT_GT(bundles, 0);
  EXPECT_GT(events, 0u);
  EXPECT_GT(t.packet(4).process_tree().processes_size(), 1);
  unlink(out.c_str());
}

TEST(RecordCommandTest, RecordsWhileACommandRunsAndPassesOnItsExitCode) {
  const std::string out = TempPath("cmd.pftrace");
  EXPECT_EQ(RunRingside({"record", "-o", out, "--", "/bin/sh", "-c", "exit 7"}), 7);
  EXPECT_GT(ReadTrace(out).packet_size(), 5);
  unlink(out.c_str());
}

TEST(RecordCommandTest, SigtermStopsEarlyAndStillWritesACompleteFile) {
  const std::string out = TempPath("term.pftrace");
  pid_t pid = 0;
  RunRingside({"record", "--duration", "60s", "-o", out}, &pid, /*wait=*/false);
  sleep(1);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const trace::Trace t = ReadTrace(out);
  ASSERT_GT(t.packet_size(), 5);
  EXPECT_TRUE(t.packet(t.packet_size() - 1).service_event().tracing_disabled());
  unlink(out.c_str());
}

TEST(RecordCommandTest, BadConfigExitsTwoAndWritesNothing) {
  const std::string cfg = TempPath("bad.pbtxt");
  std::ofstream(cfg) << "buffers { size_kb: 1024 }\nnot_a_field: 1\n";
  const std::string out = TempPath("bad.pftrace");
  EXPECT_EQ(RunRingside({"record", "-c", cfg, "-o", out}), 2);
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0);
  unlink(cfg.c_str());
}

}  // namespace
}  // namespace ringside::agent
