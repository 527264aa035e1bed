#include "agent/daemon/snapshot_requests.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/control/control_client.h"
#include "agent/control/control_frame.h"
#include "agent/session/service_packets.h"
#include "agent/snapshots/snapshot_retention.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

// The control socket in front of a SnapshotRequests: the replies reach a
// real client, later ones through the connection's LaterReply.
class RequestsOnly : public ControlHandler {
 public:
  explicit RequestsOnly(SnapshotRequests* requests) : requests_(*requests) {}
  Answer Handle(const control::Request& request, const Peer& peer,
                const LaterReply& later) override {
    return requests_.Handle(request.snapshot(), peer, later);
  }

 private:
  SnapshotRequests& requests_;
};

control::Request Snapshot(const std::string& reason, bool wait = false) {
  control::Request request;
  request.mutable_snapshot()->set_reason(reason);
  request.mutable_snapshot()->set_wait(wait);
  return request;
}

int64_t RealtimeNowNs() { return absl::ToUnixNanos(absl::Now()); }

class SnapshotRequestsTest : public ::testing::Test {
 protected:
  void Start(uint32_t cooldown_ms, int64_t start_boottime_ns = 0) {
    config::TraceConfig config;
    config.set_snapshot_request_cooldown_ms(cooldown_ms);
    config.set_max_snapshot_requests_per_hour(60);
    SnapshotRequests::Options options;
    options.log = &log_;
    options.tally = &tally_;
    options.start_boottime_ns = start_boottime_ns;
    options.take = [this](const std::string& file_reason, const std::string&,
                          const SnapshotTrigger& trigger,
                          const std::optional<TraceSummary::Window>& window) {
      absl::MutexLock lock(&mu_);
      taken_.push_back(trigger.name);
      windows_.push_back(window);
      return absl::StatusOr<std::string>("/snapshots/" + file_reason + ".pftrace");
    };
    options.outcome = [](const std::string&) { return std::optional<SnapshotWriter::Result>(); };
    requests_ = std::make_unique<SnapshotRequests>(std::move(options), config);
    handler_ = std::make_unique<RequestsOnly>(requests_.get());
    ControlServer::Options server_options;
    server_options.log = [](absl::string_view) {};
    absl::StatusOr<std::unique_ptr<ControlServer>> server =
        ControlServer::Listen(socket_path_, std::move(server_options), handler_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  ~SnapshotRequestsTest() override {
    if (server_ != nullptr) server_->Stop();
    close(null_fd_);
  }

  control::Reply Ask(const control::Request& request) {
    absl::StatusOr<control::Reply> reply = CallAgent(socket_path_, request, absl::Seconds(10));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : control::Reply();
  }
  size_t taken() {
    absl::MutexLock lock(&mu_);
    return taken_.size();
  }
  // Answers the request waiting for `result.taken_path` from `client`'s
  // thread, once it waits, and returns what the client got.
  control::Reply AnswerWhileWaiting(const control::Request& request,
                                    const SnapshotWriter::Result& result) {
    control::Reply got;
    std::atomic<bool> done{false};
    std::thread client([&] {
      got = Ask(request);
      done = true;
    });
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!done && absl::Now() < give_up) {
      // A report before the request waits answers nobody; the next one does.
      requests_->AnswerWaiters(result);
      absl::SleepFor(absl::Milliseconds(10));
    }
    client.join();
    return got;
  }

  const int null_fd_ = open("/dev/null", O_WRONLY | O_CLOEXEC);
  AgentLog log_{null_fd_};
  TriggerTally tally_;
  ScratchDir dir_;
  const std::string socket_path_ = dir_.Join("control.sock");
  absl::Mutex mu_;
  std::vector<std::string> taken_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<TraceSummary::Window>> windows_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SnapshotRequests> requests_;
  std::unique_ptr<RequestsOnly> handler_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(SnapshotRequestsTest, ARequestGetsThePathOfItsFileAtOnce) {
  Start(/*cooldown_ms=*/0);
  const control::Reply reply = Ask(Snapshot("deploy"));
  EXPECT_EQ(reply.error(), "");
  EXPECT_EQ(reply.snapshot().reason(), "deploy");
  EXPECT_TRUE(absl::StrContains(reply.snapshot().path(), "deploy")) << reply.snapshot().path();
  EXPECT_EQ(taken(), 1u);
}

TEST_F(SnapshotRequestsTest, AReasonLongerThanTheLimitTakesNoSnapshot) {
  Start(/*cooldown_ms=*/0);
  EXPECT_EQ(Ask(Snapshot(std::string(kMaxSnapshotReasonBytes + 1, 'a'))).error(),
            absl::StrCat("the snapshot reason is ", kMaxSnapshotReasonBytes + 1, " bytes; at most ",
                         kMaxSnapshotReasonBytes));
  EXPECT_EQ(taken(), 0u);
}

TEST_F(SnapshotRequestsTest, ARequestWithinTheCooldownIsRefusedAndCounted) {
  Start(/*cooldown_ms=*/60'000);
  EXPECT_EQ(Ask(Snapshot("first")).error(), "");
  const control::Reply second = Ask(Snapshot("second"));
  EXPECT_TRUE(absl::StrContains(second.error(), "snapshot_request_cooldown_ms (60000 ms)"))
      << second.error();
  EXPECT_EQ(taken(), 1u);
  EXPECT_EQ(requests_->suppressed(), 1u);
  bool counted = false;
  for (const TriggerTally::Counts& c : tally_.counts()) {
    counted |= c.name == kRequestedSnapshotReason && c.suppressed == 1;
  }
  EXPECT_TRUE(counted);
}

// A request refused for its window must not spend the requester's cooldown.
TEST_F(SnapshotRequestsTest, AWindowNotOverYetIsRefusedBeforeTheLimits) {
  Start(/*cooldown_ms=*/60'000);
  control::Request later = Snapshot("later");
  later.mutable_snapshot()->set_around_unix_ns(RealtimeNowNs() +
                                               absl::ToInt64Nanoseconds(absl::Hours(1)));
  EXPECT_TRUE(absl::StrContains(Ask(later).error(), "ask once it has passed"));
  EXPECT_EQ(Ask(Snapshot("now")).error(), "");
  EXPECT_EQ(requests_->suppressed(), 0u);
}

TEST_F(SnapshotRequestsTest, AWindowOverBeforeTheAgentStartedTakesNoSnapshot) {
  Start(/*cooldown_ms=*/0, /*start_boottime_ns=*/BoottimeNowNs());
  control::Request before = Snapshot("before");
  before.mutable_snapshot()->set_around_unix_ns(RealtimeNowNs() -
                                                absl::ToInt64Nanoseconds(absl::Minutes(10)));
  EXPECT_TRUE(
      absl::StrContains(Ask(before).error(), "it ended before this agent started recording"))
      << Ask(before).error();
  EXPECT_EQ(taken(), 0u);
}

TEST_F(SnapshotRequestsTest, AWaitIsAnsweredWithWhereTheWriterPutTheFile) {
  Start(/*cooldown_ms=*/0);
  SnapshotWriter::Result result;
  result.taken_path = "/snapshots/" + RequestedSnapshotFileReason("deploy") + ".pftrace";
  result.path = "/snapshots/elsewhere.pftrace";
  const control::Reply reply = AnswerWhileWaiting(Snapshot("deploy", /*wait=*/true), result);
  EXPECT_EQ(reply.error(), "");
  EXPECT_EQ(reply.snapshot().path(), "/snapshots/elsewhere.pftrace");
  EXPECT_EQ(reply.snapshot().reason(), "deploy");
}

TEST_F(SnapshotRequestsTest, AWaitForAFileThatFailedGetsItsError) {
  Start(/*cooldown_ms=*/0);
  SnapshotWriter::Result result;
  result.taken_path = "/snapshots/" + RequestedSnapshotFileReason("deploy") + ".pftrace";
  result.status = absl::ResourceExhaustedError("disk full");
  const control::Reply reply = AnswerWhileWaiting(Snapshot("deploy", /*wait=*/true), result);
  EXPECT_EQ(reply.error(), "snapshot " + result.taken_path + ": disk full");
}

// --around: the reply says whether the file holds the window asked for.
TEST_F(SnapshotRequestsTest, AWindowIsAnsweredWithWhatTheFileHolds) {
  Start(/*cooldown_ms=*/0);
  const int64_t around = RealtimeNowNs() - absl::ToInt64Nanoseconds(absl::Minutes(1));
  control::Request request = Snapshot("deploy");
  request.mutable_snapshot()->set_around_unix_ns(around);
  request.mutable_snapshot()->set_window_ns(absl::ToInt64Nanoseconds(absl::Seconds(10)));
  // The file holds from 20 s before the moment to now, on a trace clock
  // whose offset to the wall clock is the one the request was converted with.
  const int64_t offset = RealtimeNowNs() - BoottimeNowNs();
  SnapshotWriter::Result result;
  result.taken_path = "/snapshots/" + RequestedSnapshotFileReason("deploy") + ".pftrace";
  result.path = result.taken_path;
  result.held = SnapshotWriter::Result::Held{
      static_cast<uint64_t>(around - absl::ToInt64Nanoseconds(absl::Seconds(20)) - offset),
      static_cast<uint64_t>(BoottimeNowNs()), offset};
  const control::Reply reply = AnswerWhileWaiting(request, result);
  EXPECT_EQ(reply.error(), "");
  EXPECT_TRUE(reply.snapshot().window_held());
  EXPECT_EQ(reply.snapshot().held_from_unix_ns(),
            around - absl::ToInt64Nanoseconds(absl::Seconds(20)));
  absl::MutexLock lock(&mu_);
  ASSERT_EQ(windows_.size(), 1u);
  EXPECT_TRUE(windows_[0].has_value());
}

}  // namespace
}  // namespace ringside::agent
