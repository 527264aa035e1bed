// The agent's Prometheus metrics as operators read them, with Debian's own
// Prometheus programs: the textfile it writes for node_exporter (checked by
// promtool, served by node_exporter), `ringside status --prometheus`, and
// its HTTP listener scraped by a Prometheus server; every count the
// status' own.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/agent_process.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/prometheus_tools.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/testing/workloads.h"

extern char** environ;

namespace ringside::agent::testing {
namespace {

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint64_t StagingLosses(const control::StatusReply& s) {
  uint64_t lost = 0;
  for (const control::SourceStatus& src : s.sources()) {
    for (const control::SourceStatus::Loss& l : src.losses()) lost += l.events();
  }
  return lost;
}

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ringside agent's kernel sources need root";
    ASSERT_EQ(access(PromtoolPath().c_str(), X_OK), 0)
        << PromtoolPath() << " is missing: run make deps";
    mkdir(dir_.Join("run").c_str(), 0755);
    mkdir(dir_.Join("out").c_str(), 0750);
    mkdir(textfile_.c_str(), 0755);
  }
  // The two storm tests' agent: BPF only, of the storm's cgroup, into rings
  // (64 KiB) and a reader budget (1%) small enough to lose events; their
  // metrics settings follow.
  static std::string CgroupStormConfig(const std::string& cgroup_path) {
    return absl::StrCat(
        "buffers { size_kb: 4096 }\n"
        "data_sources { config { name: \"linux.bpf\"\n"
        "  bpf_config { ring_size_kb: 64 filter_cgroup_path: \"",
        cgroup_path,
        "\" } } }\n"
        "max_consumer_cpu_percent: 1\n");
  }
  // The agent of `config`, ready; `flags` go after its own.
  std::unique_ptr<AgentProcess> StartReady(const std::string& config,
                                           const std::vector<std::string>& flags = {}) {
    EXPECT_TRUE(WriteTextFile(dir_.Join("agent.pbtxt"), config));
    std::vector<std::string> args = AgentArgs();
    args.insert(args.end(), flags.begin(), flags.end());
    auto agent = std::make_unique<AgentProcess>(args, dir_.Join("agent.log"), notify_.path());
    const absl::Status ready = agent->WaitReady(&notify_, absl::Seconds(60));
    EXPECT_TRUE(ready.ok()) << ready << "; the agent said:\n" << agent->Log();
    return agent;
  }
  std::vector<std::string> AgentArgs() const {
    return {"-c",        dir_.Join("agent.pbtxt"), "--socket",     socket(),
            "--run-dir", dir_.Join("run"),         "--output-dir", dir_.Join("out")};
  }
  std::string socket() const { return dir_.Join("control.sock"); }
  // Starts `args` (a program and its arguments), its stderr into `log`.
  pid_t Spawn(std::vector<std::string> args, const std::string& log) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(err, 0) << args[0];
    return err == 0 ? pid : -1;
  }
  // A pipe storm in `cgroup` until the agent's staging rings have lost
  // some of it; `during` runs then, the storm still on.
  void StormUntilLosses(const ScratchCgroup& cgroup, const std::function<void()>& during = {}) {
    ringside::testing::ScopedProcesses storm(ringside::testing::StartPipeStorm(2));
    for (pid_t pid : storm.pids()) {
      ASSERT_TRUE(WriteTextFile(cgroup.dir() + "/cgroup.procs", std::to_string(pid)));
    }
    for (const absl::Time until = absl::Now() + absl::Seconds(30); StagingLosses(Status()) == 0;) {
      ASSERT_LT(absl::Now(), until) << "30 s of storm, and no loss with 1% of a CPU to read";
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (during) during();
  }
  // The status once its counts stop moving (the readers have emptied the
  // rings), within 30 s.
  control::StatusReply Settled() {
    control::StatusReply settled = Status();
    if (settled.sources_size() != 1) {
      ADD_FAILURE() << "the agent has " << settled.sources_size() << " sources, not 1";
      return settled;
    }
    // Unchanged over two seconds: longer than a record waits in a CPU's
    // batch on an idle CPU (EventSource::kBatchMaxWaitNs, 500 ms) plus the
    // reader's wait between passes of quiet rings (DrainWait::kMaxWaitMs,
    // 1 s), so that no record of the storm is still on its way. The frees
    // of its processes come after an RCU grace period, into those batches.
    for (const absl::Time deadline = absl::Now() + absl::Seconds(30);;) {
      absl::SleepFor(absl::Seconds(2));
      const control::StatusReply now = Status();
      const bool same = now.sources_size() == 1 && StagingLosses(now) == StagingLosses(settled) &&
                        now.sources(0).events() == settled.sources(0).events();
      settled = now;
      if (same) return settled;
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "the agent's counts still move 30 s after the storm";
        return settled;
      }
    }
  }
  std::string prom() const { return textfile_ + "/ringside.prom"; }
  control::StatusReply Status() {
    absl::StatusOr<control::Reply> r = Ask(socket(), StatusRequest());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status() : control::StatusReply();
  }

  ScratchDir dir_;
  std::string textfile_ = dir_.Join("textfile");
  FakeNotifySocket notify_{dir_.Join("notify.sock")};
};

// Losses made on purpose: a storm in a cgroup of the test's own, the only
// one the agent records, with its readers held to 1% of a CPU. Once the
// storm ends the counts stop moving, and the textfile written after that
// says what `status` says.
TEST_F(AgentMetricsTest, TheTextfileCountsWhatStatusCountsAndPromtoolAcceptsIt) {
  ScratchCgroup cgroup("metrics");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  std::unique_ptr<AgentProcess> agent =
      StartReady(absl::StrCat(CgroupStormConfig(cgroup.path()), "metrics_textfile: \"", textfile_,
                              "\"\n"
                              "metrics_period_ms: 200\n"));
  ASSERT_FALSE(HasFailure());
  // Written before the agent said it was ready.
  const std::optional<std::string> first = ReadWhole(prom());
  ASSERT_TRUE(first.has_value()) << prom() << " is not there; the agent said:\n" << agent->Log();
  std::string said;
  EXPECT_EQ(PromtoolCheckMetrics(*first, &said), 0) << said << "\n" << *first;
  EXPECT_EQ(said, "") << *first;
  const double events_before = SumOf(*first, "ringside_events_total");

  StormUntilLosses(cgroup);
  const control::StatusReply settled = Settled();
  ASSERT_FALSE(HasFailure());

  // A textfile written after that: the status' counts exactly.
  struct stat before;
  ASSERT_EQ(stat(prom().c_str(), &before), 0);
  std::string text;
  for (const absl::Time until = absl::Now() + absl::Seconds(10);;) {
    struct stat now;
    if (stat(prom().c_str(), &now) == 0 && now.st_ino != before.st_ino) {
      text = ReadWhole(prom()).value_or("");
      break;
    }
    ASSERT_LT(absl::Now(), until) << "ringside.prom was not written again in 10 s";
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(SampleValue(text, R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})"),
            static_cast<double>(StagingLosses(settled)))
      << text;
  EXPECT_EQ(SumOf(text, "ringside_staging_events_lost_total"),
            static_cast<double>(StagingLosses(settled)));
  EXPECT_EQ(SampleValue(text, R"(ringside_events_total{source="linux.bpf"})"),
            static_cast<double>(settled.sources(0).events()));
  EXPECT_GT(SumOf(text, "ringside_events_total"), events_before) << "the storm's events";
  EXPECT_EQ(PromtoolCheckMetrics(text, &said), 0) << said;

  // One scrape on demand, from the same renderer.
  int code = -1;
  const std::string scraped =
      RunRingsideCapture({"status", "--prometheus", "--socket", socket()}, &code);
  EXPECT_EQ(code, 0) << scraped;
  EXPECT_EQ(
      SampleValue(scraped, R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})"),
      static_cast<double>(StagingLosses(settled)));
  EXPECT_EQ(PromtoolCheckMetrics(scraped, &said), 0) << said;
  RunRingsideCapture({"status", "--prometheus", "--json", "--socket", socket()}, &code);
  EXPECT_EQ(code, 2) << "one format at a time";

  // A stopped agent's counts do not stay as if current.
  ASSERT_TRUE(agent->Signal(SIGTERM));
  const std::optional<int> exited = agent->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exited.has_value()) << agent->Log();
  EXPECT_NE(access(prom().c_str(), F_OK), 0) << "ringside.prom outlived the agent";
  EXPECT_EQ(ListDir(textfile_).size(), 0u) << "a temporary file was left";
}

// Debian's node_exporter, its textfile collector pointed at the agent's
// directory, serves ringside's series on its own /metrics.
TEST_F(AgentMetricsTest, NodeExporterServesTheAgentsSeries) {
  ASSERT_EQ(access(NodeExporterPath().c_str(), X_OK), 0)
      << NodeExporterPath() << " is missing: run make deps";
  std::unique_ptr<AgentProcess> agent =
      StartReady(absl::StrCat("buffers { size_kb: 4096 }\n"
                              "data_sources { config { name: \"linux.bpf\" } }\n"
                              "metrics_textfile: \"",
                              textfile_, "\"\nmetrics_period_ms: 500\n"));
  ASSERT_FALSE(HasFailure());

  const int port = FreePort();
  ASSERT_NE(port, 0);
  const std::string listen = absl::StrCat("127.0.0.1:", port);
  const pid_t exporter =
      Spawn({NodeExporterPath(), "--collector.disable-defaults", "--collector.textfile",
             "--collector.textfile.directory=" + textfile_, "--web.listen-address=" + listen},
            dir_.Join("node_exporter.log"));
  ASSERT_GT(exporter, 0);
  ringside::testing::ScopedProcesses stop_exporter({exporter});

  std::string served;
  int code = -1;
  for (const absl::Time until = absl::Now() + absl::Seconds(30);;) {
    served = RunProgramCapture("/usr/bin/curl",
                               {"-sf", absl::StrCat("http://", listen, "/metrics")}, &code);
    // The first textfile can be written before the first event is counted
    // (slow under sanitizers): the series must come, then rise above 0.
    if (code == 0 && SumOf(served, "ringside_events_total") > 0) break;
    ASSERT_LT(absl::Now(), until)
        << "node_exporter did not serve ringside's events above 0 in 30 s (curl " << code
        << "); it served:\n"
        << served << "\nit said:\n"
        << ReadWhole(dir_.Join("node_exporter.log")).value_or("");
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(SampleValue(served, "ringside_build_info"), std::nullopt) << "it has labels";
  EXPECT_TRUE(absl::StrContains(served, "ringside_build_info{")) << served;
  // node_exporter found nothing wrong in the file.
  EXPECT_EQ(SampleValue(served, "node_textfile_scrape_error"), 0) << served;
}

// A real Prometheus server (Debian's) scrapes the agent's listener, as in
// Kubernetes: its query API sees ringside_events_total rise, and a loss
// counter equal to the agent's own status. A flood of idle connections
// meanwhile leaves the agent recording and the scrapes going.
TEST_F(AgentMetricsTest, PrometheusScrapesTheListenerAndCountsWhatStatusCounts) {
  ASSERT_EQ(access(PrometheusPath().c_str(), X_OK), 0)
      << PrometheusPath() << " is missing: run make deps";
  ScratchCgroup cgroup("metrics-http");
  if (!cgroup.ok()) GTEST_SKIP() << cgroup.error();
  const int agent_port = FreePort(), prometheus_port = FreePort();
  ASSERT_NE(agent_port, 0);
  ASSERT_NE(prometheus_port, 0);
  std::unique_ptr<AgentProcess> agent = StartReady(absl::StrCat(
      CgroupStormConfig(cgroup.path()), "metrics_listen: \"127.0.0.1:", agent_port, "\"\n"));
  ASSERT_FALSE(HasFailure());

  ASSERT_TRUE(WriteTextFile(dir_.Join("prometheus.yml"),
                            absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                                         "scrape_configs:\n  - job_name: ringside\n"
                                         "    static_configs:\n      - targets: [\"127.0.0.1:",
                                         agent_port, "\"]\n")));
  const pid_t prometheus = Spawn({PrometheusPath(), "--config.file=" + dir_.Join("prometheus.yml"),
                                  "--storage.tsdb.path=" + dir_.Join("prometheus-data"),
                                  absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port)},
                                 dir_.Join("prometheus.log"));
  ASSERT_GT(prometheus, 0);
  ringside::testing::ScopedProcesses stop_prometheus({prometheus});

  // The newest value of `query` (one series), or nullopt.
  const auto query = [&](const std::string& q) -> std::optional<double> {
    int code = -1;
    const std::string out = RunProgramCapture(
        "/usr/bin/curl",
        {"-sfG", absl::StrCat("http://127.0.0.1:", prometheus_port, "/api/v1/query"),
         "--data-urlencode", "query=" + q},
        &code);
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    if (code != 0 || !j.is_object() || j.value("status", "") != "success") return std::nullopt;
    const nlohmann::json& result = j["data"]["result"];
    if (!result.is_array() || result.size() != 1) return std::nullopt;
    double v = 0;
    if (!absl::SimpleAtod(result[0]["value"][1].get<std::string>(), &v)) return std::nullopt;
    return v;
  };
  // Waits until `query` has a value `good` accepts; the last value seen.
  const auto wait_for = [&](const std::string& q, const std::function<bool(double)>& good,
                            const char* what) -> std::optional<double> {
    std::optional<double> v;
    for (const absl::Time until = absl::Now() + absl::Seconds(60);;) {
      v = query(q);
      if (v.has_value() && good(*v)) return v;
      if (absl::Now() > until) {
        ADD_FAILURE() << what << ": " << q << " is "
                      << (v.has_value() ? absl::StrCat(*v) : "absent") << " after 60 s; "
                      << "Prometheus said:\n"
                      << ReadWhole(dir_.Join("prometheus.log")).value_or("");
        return v;
      }
      absl::SleepFor(absl::Milliseconds(500));
    }
  };
  const std::string events = R"(ringside_events_total{source="linux.bpf"})";
  const std::optional<double> first = wait_for(
      events, [](double) { return true; }, "the first scrape");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(wait_for(R"(up{job="ringside"})", [](double v) { return v == 1; }, "the target up"), 1);

  // Losses made on purpose, then settled (as in the textfile test). Idle
  // connections past every limit while the storm runs: the listener closes
  // what it cannot take, and the agent records on.
  StormUntilLosses(cgroup, [&] {
    for (int fd : ConnectIdle(agent_port, 1000)) close(fd);
  });
  ASSERT_FALSE(HasFailure());
  const control::StatusReply settled = Settled();
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(settled.sources(0).state(), control::SourceStatus::RUNNING);
  const double lost = static_cast<double>(StagingLosses(settled));
  const std::optional<double> seen =
      wait_for(R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})",
               [lost](double v) { return v == lost; }, "the loss counter");
  EXPECT_EQ(seen, lost) << "Prometheus' loss counter is the agent's status";
  const std::optional<double> later = wait_for(
      events, [&](double v) { return v > *first; }, "ringside_events_total rising");
  EXPECT_GT(later.value_or(0), *first);
  EXPECT_EQ(wait_for(R"(up{job="ringside"})", [](double v) { return v == 1; },
                     "the target up after the flood"),
            1);
}

// metrics_per_cpu in the config file, the listener on the command line (as
// the DaemonSet starts the agent): the listener's metrics are what it
// applies to, so the agent starts, and a reload of the same file is
// applied. (Before, the file was checked before the flag was merged in:
// "set without metrics_textfile or metrics_listen", and the pod would
// crash-loop.) Without the flag, the field still applies to nothing.
TEST_F(AgentMetricsTest, PerCpuInTheFileWithTheListenerOnTheCommandLine) {
  const int port = FreePort();
  ASSERT_NE(port, 0);
  const std::string config =
      "buffers { size_kb: 4096 }\n"
      "data_sources { config { name: \"linux.bpf\" } }\n"
      "metrics_per_cpu: true\n";
  std::unique_ptr<AgentProcess> agent =
      StartReady(config, {absl::StrCat("--metrics-listen=127.0.0.1:", port)});
  ASSERT_FALSE(HasFailure());
  const std::string scraped =
      HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(HttpStatus(scraped), 200) << scraped;

  ASSERT_TRUE(agent->Signal(SIGHUP));
  control::StatusReply st = Status();
  for (const absl::Time until = absl::Now() + absl::Seconds(30); st.reload().count() == 0;) {
    ASSERT_LT(absl::Now(), until) << "SIGHUP not taken in 30 s; the agent said:\n" << agent->Log();
    absl::SleepFor(absl::Milliseconds(100));
    st = Status();
  }
  EXPECT_EQ(st.reload().refused(), 0u) << st.reload().last_error();
  ASSERT_TRUE(agent->Signal(SIGTERM));
  ASSERT_TRUE(agent->WaitExit(absl::Seconds(60)).has_value()) << agent->Log();

  int code = -1;
  const std::string said =
      RunRingsideCaptureStderr({"agent", "-c", dir_.Join("agent.pbtxt"), "--socket", socket(),
                                "--run-dir", dir_.Join("run"), "--output-dir", dir_.Join("out")},
                               &code);
  EXPECT_EQ(code, 2) << said;
  EXPECT_TRUE(absl::StrContains(said, "metrics_per_cpu")) << said;
}

// `ringside status` says where the listener listens, with the port the
// kernel picked for :0, and the log names the same address; a listener that
// could not start says why there. (Before, status said nothing of it, and
// the log said "http://127.0.0.1:0/metrics".)
TEST_F(AgentMetricsTest, StatusShowsTheListenersAddressOrWhyItFailed) {
  const std::string config =
      "buffers { size_kb: 4096 }\n"
      "data_sources { config { name: \"linux.bpf\" } }\n";
  {
    std::unique_ptr<AgentProcess> agent = StartReady(config, {"--metrics-listen=127.0.0.1:0"});
    ASSERT_FALSE(HasFailure());
    int code = -1;
    const std::string text = RunRingsideCapture({"status", "--socket", socket()}, &code);
    EXPECT_EQ(code, 0) << text;
    const size_t at = text.find("listening on 127.0.0.1:");
    ASSERT_NE(at, std::string::npos) << text;
    int port = 0;
    const std::string rest = text.substr(at + strlen("listening on 127.0.0.1:"));
    ASSERT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find_first_not_of("0123456789")), &port))
        << text;
    EXPECT_NE(port, 0) << text;
    EXPECT_EQ(HttpStatus(HttpExchange(
                  port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")),
              200)
        << "status names a port nobody serves: " << text;
    EXPECT_TRUE(
        absl::StrContains(agent->Log(), absl::StrCat("http://127.0.0.1:", port, "/metrics")))
        << agent->Log();
    const nlohmann::json j = nlohmann::json::parse(
        RunRingsideCapture({"status", "--json", "--socket", socket()}, &code), nullptr, false);
    ASSERT_TRUE(j.is_object()) << "status --json";
    EXPECT_EQ(j["metrics_listener"]["listen"], "127.0.0.1:0") << j.dump();
    EXPECT_EQ(j["metrics_listener"]["listening"], absl::StrCat("127.0.0.1:", port)) << j.dump();
    EXPECT_EQ(j["metrics_listener"]["error"], "") << j.dump();
    const std::string prom =
        RunRingsideCapture({"status", "--prometheus", "--socket", socket()}, &code);
    EXPECT_EQ(SampleValue(prom, "ringside_metrics_listener_up"), 1) << prom;
    ASSERT_TRUE(agent->Signal(SIGTERM));
    ASSERT_TRUE(agent->WaitExit(absl::Seconds(60)).has_value()) << agent->Log();
  }
  // A port taken: the agent records on, and says why it does not serve.
  const int taken = FreePort();
  ASSERT_NE(taken, 0);
  const int fd = ListenOnLoopback(taken);
  ASSERT_GE(fd, 0) << "port " << taken;
  std::unique_ptr<AgentProcess> agent =
      StartReady(config, {absl::StrCat("--metrics-listen=127.0.0.1:", taken)});
  ASSERT_FALSE(HasFailure());
  int code = -1;
  const std::string text = RunRingsideCapture({"status", "--socket", socket()}, &code);
  close(fd);
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("failed: metrics_listen 127.0.0.1:", taken)))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "in use")) << text;
  const std::string prom =
      RunRingsideCapture({"status", "--prometheus", "--socket", socket()}, &code);
  EXPECT_EQ(SampleValue(prom, "ringside_metrics_listener_up"), 0) << prom;
}

}  // namespace
}  // namespace ringside::agent::testing
