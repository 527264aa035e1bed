// `ringside agent` with write_into_file on the real kernel: rotating,
// self-contained files under a scheduling storm, with retention, and
// snapshots taken from the same buffers meanwhile.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/output/file_retention.h"
#include "agent/output/rotating_trace_file.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/workloads.h"

namespace ringside::agent::testing {
namespace {

constexpr char kStreamingConfig[] = R"pb(
  buffers { size_kb: 8192 }
  data_sources {
    config {
      name: "linux.bpf"
      bpf_config { ring_size_kb: 1024 }
    }
  }
  durable_buffer_size_kb: 1024
  write_into_file: true
  file_write_period_ms: 250
  max_file_size_bytes: 1048576
  max_files: 5
)pb";

// The packets of a trace file that carry kernel events (ftrace bundles),
// without the fields the reader adds per file, to compare across files.
std::vector<std::string> EventPackets(const trace::Trace& t) {
  std::vector<std::string> out;
  for (trace::TracePacket p : t.packet()) {
    if (!p.has_ftrace_events()) continue;
    p.clear_trusted_packet_sequence_id();
    p.clear_previous_packet_dropped();
    out.push_back(p.SerializeAsString());
  }
  return out;
}

class AgentStreamingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    config_ = dir_.Join("agent.pbtxt");
    ASSERT_TRUE(WriteTextFile(config_, kStreamingConfig));
    mkdir(dir_.Join("run").c_str(), 0755);
    mkdir(out_.c_str(), 0750);
  }
  std::vector<std::string> Args() const {
    return {"-c",        config_,          "--socket",     socket(),
            "--run-dir", dir_.Join("run"), "--output-dir", out_};
  }
  std::string socket() const { return dir_.Join("control.sock"); }
  std::unique_ptr<AgentProcess> StartReady() {
    auto agent = std::make_unique<AgentProcess>(Args(), dir_.Join("agent.log"), notify_.path());
    const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
    EXPECT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
    return agent;
  }

  ScratchDir dir_;
  std::string out_ = dir_.Join("out");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
  std::string config_;
};

TEST_F(AgentStreamingTest, AStormMakesAtMostMaxFilesWholeSelfContainedFilesWithoutDuplicates) {
  std::unique_ptr<AgentProcess> agent = StartReady();
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(4);
  // Halfway, a snapshot from the same buffers: it holds the ring's window,
  // not just what the drain has not read yet.
  absl::SleepFor(absl::Seconds(15));
  int code = -1;
  const std::string snapshot =
      RunRingsideCapture({"snapshot", "--wait", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0);
  absl::SleepFor(absl::Seconds(15));
  const std::string status_json =
      RunRingsideCapture({"status", "--json", "--socket", socket()}, &code);
  ringside::testing::StopProcesses(storm);
  ASSERT_EQ(code, 0);
  const nlohmann::json status = nlohmann::json::parse(status_json);

  // While it runs: at most max_files whole files and the one being written.
  std::vector<std::string> finished, partial;
  const std::string host = LocalHostname();
  for (const std::string& name : ListDir(out_)) {
    if (IsStreamFileName(name, host)) finished.push_back(name);
    if (absl::EndsWith(name, ".pftrace.partial")) partial.push_back(name);
  }
  EXPECT_LE(finished.size(), 5u);
  EXPECT_LE(partial.size(), 1u);  // None between a rename and the next file.
  EXPECT_GE(status["streaming"]["files_finished"].get<uint64_t>(), 6u) << status_json;
  // Retention deleted the rest (the count races the listing, so no equality).
  EXPECT_GT(status["streaming"]["files_deleted"].get<uint64_t>(), 0u);
  EXPECT_EQ(status["streaming"]["write_errors"].get<uint64_t>(), 0u);

  // Stopped: the last file is finished under its final name too, and the
  // files left are read at rest (retention deletes while it runs).
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());
  finished.clear();
  for (const std::string& name : ListDir(out_)) {
    EXPECT_FALSE(absl::EndsWith(name, ".partial")) << name;
    if (IsStreamFileName(name, host)) finished.push_back(name);
  }
  EXPECT_EQ(finished.size(), 5u);

  std::set<std::string> seen;
  int64_t first_file_start = INT64_MAX;
  std::sort(finished.begin(), finished.end());
  for (const std::string& name : finished) {
    const std::string path = absl::StrCat(out_, "/", name);
    const std::string json = RunRingsideCapture({"inspect", "--json", path}, &code);
    ASSERT_EQ(code, 0) << path << " does not open whole";
    const nlohmann::json j = nlohmann::json::parse(json);
    EXPECT_EQ(j["sched_pids"]["unresolved"].get<int>(), 0)
        << path << ": unresolved pids " << j["sched_pids"]["unresolved_pids"].dump()
        << " (the storm's: " << absl::StrJoin(storm, ",")
        << "); the durable store at the end: " << status.value("durable", nlohmann::json()).dump();
    EXPECT_GT(j["sched_pids"]["seen"].get<int>(), 0) << path;
    EXPECT_EQ(j["packets_by_type"].value("trace_stats", 0), 1) << path;
    EXPECT_EQ(j["packets_by_type"].value("system_info", 0), 1) << path;
    EXPECT_LT(j["bytes"].get<uint64_t>(), uint64_t{1} << 21) << path;  // About max_file_size_bytes.
    first_file_start = std::min(first_file_start, j["time_range"]["first_ns"].get<int64_t>());
    // No packet in two files.
    for (const std::string& p : EventPackets(ReadTraceFile(path))) {
      EXPECT_TRUE(seen.insert(p).second) << "a packet of " << name << " is in an earlier file";
    }
  }
  // Losses (the drain falling behind the storm on a slow disk) are flagged
  // in the file after each gap, but retention may have deleted that file:
  // AFullDiskPausesTheFilesNotTheRecordingAndWritingResumes, which keeps
  // every file, checks the marks.

  // The snapshot taken meanwhile opens whole and names every pid.
  const std::string snap_json =
      RunRingsideCapture({"inspect", "--json", snapshot.substr(0, snapshot.find('\n'))}, &code);
  ASSERT_EQ(code, 0) << snapshot;
  const nlohmann::json sj = nlohmann::json::parse(snap_json);
  EXPECT_EQ(sj["sched_pids"]["unresolved"].get<int>(), 0);
  // It spans far more than one drain period (250 ms): what the drain had
  // read was still in it.
  EXPECT_GT(sj["time_range"]["duration_ns"].get<int64_t>(), 2'000'000'000) << snap_json;
}

// With the config's compression the streamed files are compressed on the
// session's drain thread: each rotated file opens alone, and status counts
// the bytes and CPU of it.
TEST_F(AgentStreamingTest, CompressedFilesOpenAloneAndStatusCountsTheirCompression) {
  ASSERT_TRUE(WriteTextFile(config_, absl::StrCat(kStreamingConfig,
                                                  "file_rotation_period_ms: 1000\n"
                                                  "compression { zstd {} }\n")));
  std::unique_ptr<AgentProcess> agent = StartReady();
  const std::vector<pid_t> storm = ringside::testing::StartPipeStorm(2);
  absl::SleepFor(absl::Seconds(4));
  int code = -1;
  const std::string status_json =
      RunRingsideCapture({"status", "--json", "--socket", socket()}, &code);
  ASSERT_EQ(code, 0);
  const std::string status_text = RunRingsideCapture({"status", "--socket", socket()}, &code);
  ringside::testing::StopProcesses(storm);
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());

  const nlohmann::json streaming = nlohmann::json::parse(status_json)["streaming"];
  EXPECT_EQ(streaming["codec"], "zstd") << status_json;
  const uint64_t in = streaming["compressed_in_bytes"].get<uint64_t>();
  const uint64_t out = streaming["compressed_out_bytes"].get<uint64_t>();
  EXPECT_GT(out, 0u) << status_json;
  EXPECT_GT(in, 2 * out) << status_json;
  EXPECT_GT(streaming["compression_cpu_ns"].get<uint64_t>(), 0u) << status_json;
  EXPECT_TRUE(absl::StrContains(status_text, "compressed (zstd)")) << status_text;
  EXPECT_FALSE(absl::StrContains(agent->Log(), "uncompressed")) << agent->Log();

  std::vector<std::string> finished;
  for (const std::string& name : ListDir(out_)) {
    EXPECT_FALSE(absl::EndsWith(name, ".partial")) << name;
    if (IsStreamFileName(name, LocalHostname())) finished.push_back(name);
  }
  EXPECT_GE(finished.size(), 3u) << "4 s in files of at most 1 s";
  for (const std::string& name : finished) {
    const std::string path = absl::StrCat(out_, "/", name);
    const std::string json = RunRingsideCapture({"inspect", "--json", path}, &code);
    ASSERT_EQ(code, 0) << path << " does not open whole";
    const nlohmann::json j = nlohmann::json::parse(json);
    EXPECT_GT(j["compression"]["zstd_packets"].get<int>(), 0) << path;
    EXPECT_EQ(j["compression"]["deflate_packets"].get<int>(), 0) << path;
    EXPECT_LE(j["bytes"].get<uint64_t>(), uint64_t{1} << 20) << path;  // max_file_size_bytes.
    EXPECT_EQ(j["sched_pids"]["unresolved"].get<int>(), 0) << path;
    EXPECT_GT(j["sched_pids"]["seen"].get<int>(), 0) << path;
    EXPECT_EQ(j["packets_by_type"].value("trace_stats", 0), 1) << path;
  }
}

TEST_F(AgentStreamingTest, AKilledAgentsPartialFileIsKeptWholeByTheNextAgent) {
  {
    std::unique_ptr<AgentProcess> agent = StartReady();
    absl::SleepFor(absl::Seconds(2));
    ASSERT_TRUE(agent->Signal(SIGKILL));
    ASSERT_TRUE(agent->WaitExit(absl::Seconds(10)).has_value());
  }
  std::vector<std::string> partial;
  for (const std::string& name : ListDir(out_)) {
    if (absl::EndsWith(name, ".partial")) partial.push_back(name);
  }
  ASSERT_EQ(partial.size(), 1u);
  // A write the kill cut short: half a packet at the end.
  {
    FILE* f = fopen(absl::StrCat(out_, "/", partial[0]).c_str(), "a");
    ASSERT_NE(f, nullptr);
    fwrite("\x0a\x80\x01xyz", 1, 6, f);
    fclose(f);
  }
  std::unique_ptr<AgentProcess> agent = StartReady();
  const std::string kept = partial[0].substr(0, partial[0].size() - 8);
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat(out_, "/", kept).c_str(), &st), 0) << agent->Log();
  int code = -1;
  const std::string inspected =
      RunRingsideCapture({"inspect", absl::StrCat(out_, "/", kept)}, &code);
  EXPECT_EQ(code, 0) << "the recovered file does not open whole: " << inspected
                     << "\nthe agent said:\n"
                     << agent->Log();
  EXPECT_TRUE(absl::StrContains(agent->Log(), "kept 1 streaming file")) << agent->Log();
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
}

TEST_F(AgentStreamingTest, AFullDiskPausesTheFilesNotTheRecordingAndWritingResumes) {
  ASSERT_TRUE(WriteTextFile(config_, R"pb(
    buffers { size_kb: 2048 }
    data_sources {
      config {
        name: "linux.bpf"
        bpf_config { ring_size_kb: 512 }
      }
    }
    durable_buffer_size_kb: 512
    write_into_file: true
    file_write_period_ms: 250
    max_file_size_bytes: 1048576
    max_files: 1000
  )pb"));
  // A 6 MiB disk of the agent's own: the storm fills it in seconds.
  auto agent =
      std::make_unique<AgentProcess>(Args(), dir_.Join("full.log"), notify_.path(),
                                     std::vector<std::string>{}, PrivateTmpfs{out_, 6u << 20});
  const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
  ASSERT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
  ringside::testing::ScopedProcesses storm(ringside::testing::StartPipeStorm(4));
  auto status = [&] {
    absl::StatusOr<control::Reply> r = Ask(socket(), StatusRequest());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status() : control::StatusReply();
  };
  control::StatusReply full;
  for (int i = 0; i < 200; i++) {
    full = status();
    if (full.streaming().write_errors() > 0 && full.streaming().bytes_lost() > 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GT(full.streaming().write_errors(), 0u) << agent->Log();
  EXPECT_TRUE(absl::StrContains(full.streaming().last_error(), "No space left on device"))
      << full.streaming().last_error();
  // Recording goes on while the files cannot grow; what the buffers
  // overwrite meanwhile is counted.
  absl::SleepFor(absl::Seconds(2));
  const control::StatusReply stalled = status();
  EXPECT_GT(stalled.sources(0).events(), full.sources(0).events());
  EXPECT_GT(stalled.streaming().bytes_lost(), 0u);
  EXPECT_GT(stalled.streaming().write_errors(), full.streaming().write_errors());  // Retried.
  // Said once, not every period.
  const std::string log = agent->Log();
  size_t said = 0;
  for (size_t at = log.find("No space left"); at != std::string::npos;
       at = log.find("No space left", at + 1)) {
    said++;
  }
  EXPECT_LE(said, 2u) << log;  // A write, perhaps a new file's creation.

  // Room again: writing resumes and says so.
  std::vector<std::string> finished;
  const std::string host = LocalHostname();
  for (const std::string& name : ListDir(agent->SeenByAgent(out_))) {
    if (IsStreamFileName(name, host)) finished.push_back(name);
  }
  std::sort(finished.begin(), finished.end());
  ASSERT_GE(finished.size(), 2u);
  const std::string kept = finished.back();
  for (size_t i = 0; i + 1 < finished.size(); i++) {
    ASSERT_EQ(unlink(agent->SeenByAgent(absl::StrCat(out_, "/", finished[i])).c_str()), 0);
  }
  absl::SleepFor(absl::Seconds(2));
  const control::StatusReply resumed = status();
  storm.Stop();
  EXPECT_GT(resumed.streaming().files_finished(), stalled.streaming().files_finished())
      << agent->Log();
  EXPECT_TRUE(absl::StrContains(agent->Log(), "again")) << agent->Log();

  // The file the full disk cut is whole up to its last packet, and the
  // files after the gap say data was lost before their packets.
  uint64_t dropped_marks = 0;
  for (const std::string& name : ListDir(agent->SeenByAgent(out_))) {
    if (!IsStreamFileName(name, host)) continue;
    int code = -1;
    const std::string json = RunRingsideCapture(
        {"inspect", "--json", agent->SeenByAgent(absl::StrCat(out_, "/", name))}, &code);
    EXPECT_EQ(code, 0) << name << " does not open whole";
    if (code != 0) continue;
    const nlohmann::json j = nlohmann::json::parse(json);
    for (const auto& seq : j["sequences"]) {
      dropped_marks += seq["previous_packet_dropped"].get<uint64_t>();
    }
  }
  EXPECT_GT(dropped_marks, 0u);
  EXPECT_FALSE(kept.empty());
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
}

// Issue 39: a streaming config that leaves durable_buffer_size_kb out. A
// storm ends while the ring still holds a second of its events not yet
// written; files cut while that backlog is written begin after the storm
// ended. Each must still name every pid it holds events of. Without the
// durable store (then off unless asked for) each file began with a /proc
// scan of its own time, which no longer had the storm's processes.
TEST_F(AgentStreamingTest, FilesCutAfterAStormEndedStillNameItsProcesses) {
  testing::ScratchCgroup cgroup("stream");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  ASSERT_TRUE(WriteTextFile(config_, absl::StrCat("buffers { size_kb: 16384 }\n"
                                                  "data_sources { config { name: \"linux.bpf\"\n"
                                                  "  bpf_config { filter_cgroup_path: \"",
                                                  cgroup.path(),
                                                  "\" } } }\n"
                                                  "write_into_file: true\n"
                                                  "file_write_period_ms: 2000\n"
                                                  "max_file_size_bytes: 1048576\n")));
  std::unique_ptr<AgentProcess> agent = StartReady();
  ringside::testing::ScopedProcesses storm(ringside::testing::StartPipeStorm(2));
  const std::vector<pid_t> storm_pids = storm.pids();
  for (pid_t pid : storm_pids) {
    ASSERT_TRUE(WriteTextFile(cgroup.dir() + "/cgroup.procs", std::to_string(pid)));
  }
  auto files_finished = [&] {
    absl::StatusOr<control::Reply> r = Ask(socket(), StatusRequest());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status().streaming().files_finished() : 0;
  };
  // Just after a write (which finished a file): the storm then runs for a
  // second of the next period, and that second is written after it ended.
  const uint64_t before = files_finished();
  uint64_t now = before;
  for (int i = 0; i < 1000 && now == before; i++) {
    absl::SleepFor(absl::Milliseconds(10));
    now = files_finished();
  }
  ASSERT_GT(now, before) << "no file was finished in 10 s";
  absl::SleepFor(absl::Seconds(1));
  storm.Stop();
  absl::SleepFor(absl::Seconds(3));  // A write of the backlog.
  ASSERT_EQ(RunRingside({"stop", "--wait", "--socket", socket()}), 0);
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(30)).has_value());

  const std::string host = LocalHostname();
  int files = 0;
  for (const std::string& name : ListDir(out_)) {
    if (!IsStreamFileName(name, host)) continue;
    files++;
    const std::string path = absl::StrCat(out_, "/", name);
    int code = -1;
    const std::string json = RunRingsideCapture({"inspect", "--json", path}, &code);
    ASSERT_EQ(code, 0) << path << " does not open whole";
    const nlohmann::json j = nlohmann::json::parse(json);
    EXPECT_EQ(j["sched_pids"]["unresolved"].get<int>(), 0)
        << path << ": unresolved pids " << j["sched_pids"]["unresolved_pids"].dump()
        << " (the storm's: " << absl::StrJoin(storm_pids, ",") << ")";
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace ringside::agent::testing
