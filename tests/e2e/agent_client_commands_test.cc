// `ringside status`, `snapshot` and `stop`: the real binary against a real
// control server whose handler is a fake agent.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "agent/control/control_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/ringside_cli.h"

namespace ringside::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::RunRingsideCapture;
using testing::RunRingsideCaptureStderr;
using testing::ScratchDir;

constexpr int32_t kAgentPid = 4321;

// A fake agent: canned answers, and every request it was sent.
class FakeAgent : public ControlHandler {
 public:
  Answer Handle(const control::Request& request, const Peer&, const LaterReply&) override {
    control::Reply reply;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
      if (!error_.empty()) {
        reply.set_error(error_);
        return reply;
      }
    }
    switch (request.request_case()) {
      case control::Request::kStatus: {
        control::StatusReply* status = reply.mutable_status();
        status->set_pid(stop_requested_.HasBeenNotified() ? successor_pid_ : kAgentPid);
        status->set_version("9.8.7");
        status->set_uptime_ms(61'000);
        control::SourceStatus* source = status->add_sources();
        source->set_name("linux.bpf");
        source->set_state(control::SourceStatus::RUNNING);
        source->set_events(777);
        break;
      }
      case control::Request::kSnapshot:
        if (snapshot_delay_ > absl::ZeroDuration()) absl::SleepFor(snapshot_delay_);
        reply.mutable_snapshot()->set_path(
            request.snapshot().wait() ? "/snapshots/done.pftrace" : "/snapshots/started.pftrace");
        reply.mutable_snapshot()->set_reason(request.snapshot().reason());
        if (request.snapshot().has_around_unix_ns() && window_held_.has_value()) {
          reply.mutable_snapshot()->set_window_held(*window_held_);
          reply.mutable_snapshot()->set_held_from_unix_ns(1'795'806'400'000'000'000);
          reply.mutable_snapshot()->set_held_until_unix_ns(1'795'806'460'000'000'000);
        }
        break;
      case control::Request::kStop:
        reply.mutable_stop();
        if (!stop_requested_.HasBeenNotified()) stop_requested_.Notify();
        break;
      default:
        reply.set_error("unexpected request");
    }
    return reply;
  }

  void set_error(const std::string& error) {
    absl::MutexLock lock(&mu_);
    error_ = error;
  }
  // The pid a status reports once a stop was asked for: the agent's own
  // (it is still stopping) or a successor's.
  void set_successor_pid(int32_t pid) { successor_pid_ = pid; }
  void set_snapshot_delay(absl::Duration d) { snapshot_delay_ = d; }
  // Whether a snapshot --around reply says its window was held whole.
  void set_window_held(bool held) { window_held_ = held; }
  absl::Notification& stop_requested() { return stop_requested_; }

  std::vector<control::Request> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  absl::Mutex mu_;
  std::vector<control::Request> requests_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  int32_t successor_pid_ = kAgentPid;
  absl::Duration snapshot_delay_;
  std::optional<bool> window_held_;
  absl::Notification stop_requested_;
};

class AgentClientCommandsTest : public ::testing::Test {
 protected:
  // An agent config whose control_socket is `socket`.
  std::string WriteConfig(const std::string& socket) {
    const std::string path = dir_.Join("agent.pbtxt");
    std::ofstream(path) << "buffers { size_kb: 1024 }\n"
                           "data_sources { config { name: \"linux.ftrace\"\n"
                           "  ftrace_config { ftrace_events: \"sched/sched_switch\" } } }\n"
                           "control_socket: \""
                        << socket << "\"\n";
    return path;
  }

  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    absl::StatusOr<std::unique_ptr<ControlServer>> server =
        ControlServer::Listen(socket_, ControlServer::Options(), &agent_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    if (stopper_.joinable()) stopper_.join();
    if (server_) server_->Stop();
  }

  // Runs `ringside ARGS --socket <the fake agent's socket>`; stdout.
  std::string Run(std::vector<std::string> args, int* exit_code) {
    args.push_back("--socket=" + socket_);
    return RunRingsideCapture(args, exit_code);
  }
  std::string RunStderr(std::vector<std::string> args, int* exit_code) {
    args.push_back("--socket=" + socket_);
    return RunRingsideCaptureStderr(args, exit_code);
  }

  ScratchDir dir_;
  const std::string socket_ = dir_.Join("control.sock");
  FakeAgent agent_;
  std::unique_ptr<ControlServer> server_;
  std::thread stopper_;
};

TEST_F(AgentClientCommandsTest, StatusPrintsTheAgentsReplyAsText) {
  int code = -1;
  const std::string out = Run({"status"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("ringside 9.8.7, pid 4321, up 1m 01s"));
  EXPECT_THAT(out, HasSubstr("linux.bpf"));
  EXPECT_THAT(out, HasSubstr("RUNNING"));
  ASSERT_EQ(agent_.requests().size(), 1u);
  EXPECT_TRUE(agent_.requests()[0].has_status());
}

TEST_F(AgentClientCommandsTest, StatusJsonPrintsTheAgentsReplyAsJson) {
  int code = -1;
  const std::string out = Run({"status", "--json"}, &code);
  EXPECT_EQ(code, 0);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["pid"], kAgentPid);
  EXPECT_EQ(j["sources"][0]["state"], "RUNNING");
  EXPECT_EQ(j["sources"][0]["events"], 777);
}

// `ringside agent & ringside status --wait`: the status of an agent that
// starts listening only after the command began, not "no agent".
TEST_F(AgentClientCommandsTest, StatusWaitWaitsForAnAgentStillStarting) {
  const std::string later = dir_.Join("later.sock");
  std::unique_ptr<ControlServer> late_server;
  stopper_ = std::thread([&] {
    absl::SleepFor(absl::Milliseconds(500));
    absl::StatusOr<std::unique_ptr<ControlServer>> server =
        ControlServer::Listen(later, ControlServer::Options(), &agent_);
    if (server.ok()) late_server = std::move(*server);
  });
  int code = -1;
  const std::string out =
      RunRingsideCapture({"status", "--wait", "--timeout", "30s", "--socket", later}, &code);
  stopper_.join();
  ASSERT_NE(late_server, nullptr);
  late_server->Stop();
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("ringside 9.8.7, pid 4321"));
}

TEST_F(AgentClientCommandsTest, StatusWaitGivesUpAfterItsTimeoutSayingNoAgentListens) {
  const std::string nowhere = dir_.Join("nobody.sock");
  int code = -1;
  const std::string err = RunRingsideCaptureStderr(
      {"status", "--wait", "--timeout", "300ms", "--socket", nowhere}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err, HasSubstr("ringside status: no ringside agent is listening on " + nowhere));
  // --timeout alone is a usage error: it would be ignored.
  RunRingsideCaptureStderr({"status", "--timeout", "1s", "--socket", nowhere}, &code);
  EXPECT_EQ(code, 2);
}

TEST_F(AgentClientCommandsTest, SnapshotWaitPrintsTheFinishedFilesPath) {
  int code = -1;
  const std::string out = Run({"snapshot", "--wait", "--reason", "latency spike"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "/snapshots/done.pftrace\n");
  ASSERT_EQ(agent_.requests().size(), 1u);
  const control::Request request = agent_.requests()[0];
  ASSERT_TRUE(request.has_snapshot());
  EXPECT_EQ(request.snapshot().reason(), "latency spike");
  EXPECT_TRUE(request.snapshot().wait());
}

TEST_F(AgentClientCommandsTest, SnapshotWithoutWaitPrintsThePathBeingWritten) {
  int code = -1;
  const std::string out = Run({"snapshot"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "/snapshots/started.pftrace\n");
  ASSERT_EQ(agent_.requests().size(), 1u);
  EXPECT_FALSE(agent_.requests()[0].snapshot().wait());
  EXPECT_FALSE(agent_.requests()[0].snapshot().has_reason());
}

TEST_F(AgentClientCommandsTest, SnapshotReasonThatIsNotUtf8IsAUsageError) {
  int code = -1;
  const std::string err = RunStderr({"snapshot", "--reason", "bad \xff byte"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("ringside snapshot: --reason is not UTF-8 text"));
  EXPECT_THAT(agent_.requests(), IsEmpty());
}

TEST_F(AgentClientCommandsTest, SnapshotReasonOver200BytesIsAUsageError) {
  int code = -1;
  const std::string err = RunStderr({"snapshot", "--reason", std::string(201, 'x')}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("--reason is 201 bytes long; at most 200"));
  EXPECT_THAT(agent_.requests(), IsEmpty());
  // 200 is fine.
  Run({"snapshot", "--reason", std::string(200, 'x')}, &code);
  EXPECT_EQ(code, 0);
}

TEST_F(AgentClientCommandsTest, SnapshotAroundSendsTheMomentAndItsWindowAndWaitsForTheFile) {
  agent_.set_window_held(true);
  int code = -1;
  const std::string out =
      Run({"snapshot", "--around", "2026-11-27T11:15:00.5+01:00", "--window", "1m"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "/snapshots/done.pftrace\n");
  ASSERT_EQ(agent_.requests().size(), 1u);
  const control::SnapshotRequest r = agent_.requests()[0].snapshot();
  EXPECT_EQ(r.around_unix_ns(),
            absl::ToUnixNanos(
                absl::FromCivil(absl::CivilSecond(2026, 11, 27, 10, 15, 0), absl::UTCTimeZone()) +
                absl::Milliseconds(500)));
  EXPECT_EQ(r.window_ns(), 60'000'000'000u);
  EXPECT_TRUE(r.wait());
  EXPECT_EQ(r.reason(), "around");
}

TEST_F(AgentClientCommandsTest, SnapshotAroundSaysWhenTheRingHeldOnlyPartOfTheWindow) {
  agent_.set_window_held(false);
  int code = -1;
  const std::string err = RunStderr({"snapshot", "--around", "1795806400"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(err, HasSubstr("the ring held only part of the window: it holds "
                             "2026-11-27T19:06:40.000000Z .. 2026-11-27T19:07:40.000000Z"));
  EXPECT_EQ(agent_.requests()[0].snapshot().window_ns(), 30'000'000'000u);
}

TEST_F(AgentClientCommandsTest, SnapshotAroundAMomentToComeWaitsForTheWindowsEnd) {
  agent_.set_window_held(true);
  const absl::Time asked = absl::Now();
  const std::string moment =
      absl::FormatTime(absl::RFC3339_full, asked + absl::Seconds(1), absl::UTCTimeZone());
  int code = -1;
  const std::string err = RunStderr({"snapshot", "--around", moment, "--window", "1s"}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_THAT(err, HasSubstr("waiting"));
  // The agent was found before the wait; the snapshot is not asked before
  // the window's end (the moment + 0.5 s).
  ASSERT_EQ(agent_.requests().size(), 2u);
  EXPECT_TRUE(agent_.requests()[0].has_status());
  EXPECT_TRUE(agent_.requests()[1].has_snapshot());
  EXPECT_GE(absl::Now() - asked, absl::Milliseconds(1400));
}

// Issue 52: with no agent, --around first waited for the window's end (up
// to ten minutes), then said no agent listens. It says so at once.
TEST_F(AgentClientCommandsTest, SnapshotAroundAMomentToComeWithNoAgentSaysSoAtOnce) {
  const std::string nowhere = dir_.Join("nobody.sock");
  const std::string moment =
      absl::FormatTime(absl::RFC3339_full, absl::Now() + absl::Seconds(20), absl::UTCTimeZone());
  const absl::Time asked = absl::Now();
  int code = -1;
  const std::string err = RunRingsideCaptureStderr(
      {"snapshot", "--socket", nowhere, "--around", moment, "--window", "1s"}, &code);
  EXPECT_EQ(code, 1) << err;
  EXPECT_THAT(err, HasSubstr("no ringside agent is listening on " + nowhere));
  EXPECT_THAT(err, Not(HasSubstr("waiting")));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(10));
}

// GNU `date --rfc-3339=seconds|ns` writes a space for the 'T', as RFC 3339
// allows: the moment another node's log gives is taken as it is.
TEST_F(AgentClientCommandsTest, SnapshotAroundTakesGnuDatesRfc3339Output) {
  agent_.set_window_held(true);
  const absl::Time moment =
      absl::FromCivil(absl::CivilSecond(2026, 11, 27, 10, 15, 0), absl::UTCTimeZone());
  for (const std::string text :
       {"2026-11-27 11:15:00+01:00", "2026-11-27 10:15:00.250000000+00:00"}) {
    int code = -1;
    const std::string err = RunStderr({"snapshot", "--around", text}, &code);
    EXPECT_EQ(code, 0) << text << ": " << err;
  }
  ASSERT_EQ(agent_.requests().size(), 2u);
  EXPECT_EQ(agent_.requests()[0].snapshot().around_unix_ns(), absl::ToUnixNanos(moment));
  EXPECT_EQ(agent_.requests()[1].snapshot().around_unix_ns(),
            absl::ToUnixNanos(moment + absl::Milliseconds(250)));
}

// The agent refuses windows over a day; the client says so before anything
// (no wait for such a window's end), and --help gives the limit.
TEST_F(AgentClientCommandsTest, SnapshotWindowOverADayIsAUsageErrorAndHelpGivesTheLimit) {
  int code = -1;
  const std::string err =
      RunStderr({"snapshot", "--around", "1795806400", "--window", "25h"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("--window 25h: at most 24h"));
  EXPECT_THAT(agent_.requests(), IsEmpty());
  const std::string help = RunRingsideCapture({"snapshot", "--help"}, &code);
  EXPECT_EQ(code, 0);
  // Words only: the help is wrapped at 80 columns.
  const std::string words =
      absl::StrJoin(absl::StrSplit(help, absl::ByAnyChar(" \n"), absl::SkipEmpty()), " ");
  EXPECT_THAT(words, HasSubstr("--window D with --around, the span to hold, TIME in its middle "
                               "(30s; at most 24h)"));
  // A day exactly is still asked.
  agent_.set_window_held(true);
  RunStderr({"snapshot", "--around", "1795806400", "--window", "24h"}, &code);
  EXPECT_EQ(code, 0);
}

TEST_F(AgentClientCommandsTest, SnapshotAroundWhatIsNotAMomentIsAUsageErrorNamingIt) {
  for (const std::string bad : {"yesterday", "2026-11-27 10:15", "17958064.1234567890", "-5"}) {
    int code = -1;
    const std::string err = RunStderr({"snapshot", "--around", bad}, &code);
    EXPECT_EQ(code, 2) << bad;
    EXPECT_THAT(err, HasSubstr("--around " + bad)) << bad;
  }
  int code = -1;
  std::string err = RunStderr({"snapshot", "--around", "4102444800"}, &code);  // 2100.
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("the window ends"));
  err = RunStderr({"snapshot", "--window", "10s"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("--window needs --around"));
  EXPECT_THAT(agent_.requests(), IsEmpty());
}

TEST_F(AgentClientCommandsTest, SnapshotGivesUpAfterItsTimeout) {
  agent_.set_snapshot_delay(absl::Seconds(2));
  int code = -1;
  const std::string err = RunStderr({"snapshot", "--wait", "--timeout", "200ms"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err, HasSubstr("did not reply within 200ms"));
}

TEST_F(AgentClientCommandsTest, StopSendsAStopRequest) {
  int code = -1;
  const std::string out = Run({"stop"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "the agent on " + socket_ + " is stopping\n");
  ASSERT_EQ(agent_.requests().size(), 1u);
  EXPECT_TRUE(agent_.requests()[0].has_stop());
}

TEST_F(AgentClientCommandsTest, StopWaitReturnsOnceTheSocketIsGone) {
  // The agent goes away a moment after it is asked to.
  std::atomic<bool> stopping{false};
  stopper_ = std::thread([this, &stopping] {
    agent_.stop_requested().WaitForNotification();
    absl::SleepFor(absl::Milliseconds(300));
    stopping = true;
    server_->Stop();
  });
  int code = -1;
  const std::string out = Run({"stop", "--wait"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out,
            "the agent on " + socket_ + " is stopping\nthe agent on " + socket_ + " has stopped\n");
  EXPECT_TRUE(stopping) << "returned while the agent was still there";
}

TEST_F(AgentClientCommandsTest, StopWaitCountsASuccessorAgentAsStopped) {
  agent_.set_successor_pid(kAgentPid + 1);
  int code = -1;
  const std::string out = Run({"stop", "--wait"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("has stopped"));
}

TEST_F(AgentClientCommandsTest, StopWaitFailsWhenTheAgentStillAnswersAfterTheTimeout) {
  int code = -1;
  const std::string err = RunStderr({"stop", "--wait", "--timeout", "500ms"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err,
              HasSubstr("ringside stop: the agent on " + socket_ + " still answers after 500ms"));
}

TEST_F(AgentClientCommandsTest, NoAgentAtTheSocketIsExitOneSayingHowToStartOne) {
  const std::string nowhere = dir_.Join("nobody.sock");
  for (const char* command : {"status", "snapshot", "stop"}) {
    int code = -1;
    const std::string err = RunRingsideCaptureStderr({command, "--socket", nowhere}, &code);
    EXPECT_EQ(code, 1) << command;
    EXPECT_THAT(err, HasSubstr(std::string("ringside ") + command +
                               ": no ringside agent is listening on " + nowhere))
        << command;
    EXPECT_THAT(err, HasSubstr("is it running? `ringside agent` starts one")) << command;
  }
}

TEST_F(AgentClientCommandsTest, AgentRefusalIsExitOneNamingItsError) {
  agent_.set_error("snapshots are rate-limited: next in 12s");
  for (const char* command : {"status", "snapshot", "stop"}) {
    int code = -1;
    const std::string err = RunStderr({command}, &code);
    EXPECT_EQ(code, 1) << command;
    EXPECT_THAT(err, HasSubstr(std::string("ringside ") + command +
                               ": the agent refused: snapshots are rate-limited: next in 12s"));
  }
}

TEST_F(AgentClientCommandsTest, ConfigsControlSocketIsUsed) {
  const std::string config = WriteConfig(socket_);
  int code = -1;
  const std::string out = RunRingsideCapture({"status", "-c", config}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("pid 4321"));
}

// After an edit the agent refused on reload, its config file no longer
// loads, but the agent still runs on the one it loaded: status and the other
// commands still find it, through the control_socket line of the text, and
// say why they read it that way.
TEST_F(AgentClientCommandsTest, AConfigThatNoLongerLoadsStillNamesTheAgentsSocket) {
  const std::string config = dir_.Join("broken.pbtxt");
  {
    std::ofstream f(config);
    f << "buffers { size_kb: 1024 }\n  control_socket: \"" << socket_ << "\"\nbogus_field: 1\n";
  }
  int code = -1;
  const std::string out = RunRingsideCapture({"status", "-c", config}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("pid 4321"));
  const std::string err = RunRingsideCaptureStderr({"status", "-c", config}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(err, HasSubstr("ringside status: note: "));
  EXPECT_THAT(err, HasSubstr("bogus_field"));
  EXPECT_THAT(err, HasSubstr("asking the agent on " + socket_));
}

TEST_F(AgentClientCommandsTest, SocketFlagWinsOverTheConfig) {
  const std::string config = WriteConfig(dir_.Join("other.sock"));
  int code = -1;
  Run({"status", "-c", config}, &code);
  EXPECT_EQ(code, 0);
}

TEST_F(AgentClientCommandsTest, UnreadableConfigIsExitTwo) {
  int code = -1;
  const std::string err =
      RunRingsideCaptureStderr({"status", "-c", dir_.Join("missing.pbtxt")}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("missing.pbtxt"));
}

TEST_F(AgentClientCommandsTest, BadFlagIsExitTwo) {
  int code = -1;
  RunRingsideCaptureStderr({"status", "--reason", "x"}, &code);
  EXPECT_EQ(code, 2);
  RunRingsideCaptureStderr({"snapshot", "--timeout", "soon"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(agent_.requests(), IsEmpty());
}

TEST_F(AgentClientCommandsTest, UserOutsideTheControlGroupGetsPermissionDenied) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the client as another user";
  int code = -1;
  const std::string err = RunRingsideCaptureStderr({"status", "--socket", socket_}, &code,
                                                   /*uid=*/65534);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err, HasSubstr("ringside status: permission denied on " + socket_));
  EXPECT_THAT(err, HasSubstr("only root and members of the agent's control group"));
  EXPECT_THAT(agent_.requests(), IsEmpty());
}

}  // namespace
}  // namespace ringside::agent
