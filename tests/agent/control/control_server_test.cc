#include "agent/control/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/control/control_client.h"
#include "agent/control/control_frame.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using ::testing::HasSubstr;
using testing::RawClient;
using testing::ScratchDir;
using ::testing::StartsWith;

// Answers like an agent would, from canned values, and remembers who asked.
class FakeHandler : public ControlHandler {
 public:
  Answer Handle(const control::Request& request, const Peer& peer,
                const LaterReply& later) override {
    {
      absl::MutexLock lock(&mu_);
      peers_.push_back(peer);
      if (request.has_snapshot() && request.snapshot().wait() && wait_limit_.has_value()) {
        parked_.push_back(later);
        if (reply_at_once_) later.Send(SnapshotDone(request.snapshot().reason()));
        control::Reply late;
        late.set_error("snapshot not written within the limit");
        return Answer::Later(*wait_limit_, late);
      }
    }
    control::Reply reply;
    switch (request.request_case()) {
      case control::Request::kStatus:
        reply.mutable_status()->set_pid(4321);
        reply.mutable_status()->set_uptime_ms(++status_calls_);
        break;
      case control::Request::kSnapshot:
        if (request.snapshot().wait()) absl::SleepFor(snapshot_wait_time_);
        reply.mutable_snapshot()->set_path(
            absl::StrCat("/snapshots/", request.snapshot().wait() ? "done-" : "started-",
                         request.snapshot().reason()));
        reply.mutable_snapshot()->set_reason(request.snapshot().reason());
        break;
      case control::Request::kStop:
        reply.mutable_stop();
        break;
      case control::Request::kTrigger:
        if (request.trigger().name() == "oom") {
          reply.mutable_trigger();
        } else {
          reply.set_error("no trigger named " + request.trigger().name());
        }
        break;
      default:
        reply.set_error("unexpected");
    }
    handled_.fetch_add(1);
    return reply;
  }
  // Handle() calls that returned an answer at once.
  int handled() const { return handled_.load(); }

  // How long a snapshot with wait takes.
  void set_snapshot_wait_time(absl::Duration d) { snapshot_wait_time_ = d; }
  // A snapshot with wait is answered later (Answer::Later(limit)), through
  // the LaterReply parked(i) of the i-th such request; or, with
  // `reply_at_once`, through it before Handle() returns.
  void AnswerSnapshotWaitLater(absl::Duration limit, bool reply_at_once = false) {
    absl::MutexLock lock(&mu_);
    wait_limit_ = limit;
    reply_at_once_ = reply_at_once;
  }
  // Once the i-th snapshot with wait was answered with Later().
  LaterReply Parked(size_t i) {
    absl::MutexLock lock(&mu_);
    auto parked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return parked_.size() > i; };
    mu_.Await(absl::Condition(&parked));
    return parked_[i];
  }
  static control::Reply SnapshotDone(const std::string& reason) {
    control::Reply reply;
    reply.mutable_snapshot()->set_path("/snapshots/written-" + reason);
    reply.mutable_snapshot()->set_reason(reason);
    return reply;
  }

  std::vector<Peer> peers() {
    absl::MutexLock lock(&mu_);
    return peers_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Peer> peers_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Duration> wait_limit_ ABSL_GUARDED_BY(mu_);
  bool reply_at_once_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<LaterReply> parked_ ABSL_GUARDED_BY(mu_);
  int status_calls_ = 0;
  absl::Duration snapshot_wait_time_;
  std::atomic<int> handled_{0};
};

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  ControlServer::Options DefaultOptions() {
    ControlServer::Options options;
    options.log = [this](absl::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_.push_back(std::string(line));
    };
    return options;
  }

  void Start(ControlServer::Options options) {
    absl::StatusOr<std::unique_ptr<ControlServer>> server =
        ControlServer::Listen(socket_path_, std::move(options), &handler_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void Start() { Start(DefaultOptions()); }

  absl::StatusOr<control::Reply> Call(const control::Request& request) {
    return CallAgent(socket_path_, request, absl::Seconds(10));
  }
  // Call(), again while the server refuses it as busy (a connection it has
  // not yet seen closed holds the last place), for up to 10 s.
  absl::StatusOr<control::Reply> CallWhileBusy(const control::Request& request) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    absl::StatusOr<control::Reply> reply;
    do {
      reply = Call(request);
    } while (reply.ok() && absl::StrContains(reply->error(), "the agent is busy") &&
             absl::Now() < give_up);
    return reply;
  }
  static control::Request Status() {
    control::Request request;
    request.mutable_status();
    return request;
  }

  std::string Log() {
    absl::MutexLock lock(&log_mu_);
    std::string all;
    for (const std::string& line : log_) all += line + "\n";
    return all;
  }

  ScratchDir dir_;
  const std::string socket_path_ = dir_.Join("control.sock");
  FakeHandler handler_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
  std::unique_ptr<ControlServer> server_;
};

TEST_F(ControlServerTest, StatusRequestGetsTheHandlersReplyAndThePeersCredentials) {
  Start();
  const absl::StatusOr<control::Reply> reply = Call(Status());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_FALSE(reply->has_error()) << reply->error();
  EXPECT_EQ(reply->status().pid(), 4321);
  ASSERT_EQ(handler_.peers().size(), 1u);
  EXPECT_EQ(handler_.peers()[0].pid, getpid());
  EXPECT_EQ(handler_.peers()[0].uid, getuid());
  EXPECT_EQ(handler_.peers()[0].gid, getgid());
}

TEST_F(ControlServerTest, SnapshotRequestCarriesReasonAndWait) {
  Start();
  control::Request request;
  request.mutable_snapshot()->set_reason("oom-seen");
  request.mutable_snapshot()->set_wait(true);
  const absl::StatusOr<control::Reply> reply = Call(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/done-oom-seen");
  EXPECT_EQ(reply->snapshot().reason(), "oom-seen");
}

TEST_F(ControlServerTest, StopRequestGetsAStopReply) {
  Start();
  control::Request request;
  request.mutable_stop();
  const absl::StatusOr<control::Reply> reply = Call(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_stop());
}

TEST_F(ControlServerTest, TriggerRequestGetsATriggerReplyOrTheHandlersError) {
  Start();
  control::Request request;
  request.mutable_trigger()->set_name("oom");
  absl::StatusOr<control::Reply> reply = Call(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_trigger());
  request.mutable_trigger()->set_name("nope");
  reply = Call(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), "no trigger named nope");
}

TEST_F(ControlServerTest, SeveralRequestsOnOneConnectionAreAnsweredInOrder) {
  Start();
  RawClient client(socket_path_);
  ASSERT_TRUE(client.ok());
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("second");
  // All three in one write: the server must cut them apart.
  ASSERT_TRUE(client.Send(EncodeFrame(Status()) + EncodeFrame(snapshot) + EncodeFrame(Status())));
  absl::StatusOr<control::Reply> reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().uptime_ms(), 1u);
  reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().reason(), "second");
  reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().uptime_ms(), 2u);
}

TEST_F(ControlServerTest, GarbageFrameGetsAnErrorAndTheConnectionGoesOn) {
  Start();
  RawClient client(socket_path_);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send(std::string("\x05\x00\x00\x00\xff\xff\xff\xff\xff", 9)));
  absl::StatusOr<control::Reply> reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->error(), StartsWith("malformed request"));
  ASSERT_TRUE(client.Send(Status()));
  reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status());
  EXPECT_TRUE(Call(Status()).ok());
}

TEST_F(ControlServerTest, OversizedLengthIsRefusedAndTheConnectionClosed) {
  Start();
  RawClient client(socket_path_);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send(std::string("\xf0\xff\xff\xff", 4)));
  const absl::StatusOr<control::Reply> reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), "request of 4294967280 bytes is larger than the limit of 65536 bytes");
  EXPECT_TRUE(client.ClosedByServer(absl::Seconds(10)));
  EXPECT_TRUE(Call(Status()).ok());
}

TEST_F(ControlServerTest, StalledHalfFrameIsDroppedAfterTheTimeoutWhileOthersAreServed) {
  ControlServer::Options options = DefaultOptions();
  options.io_timeout = absl::Milliseconds(500);
  Start(std::move(options));
  RawClient stalled(socket_path_);
  ASSERT_TRUE(stalled.ok());
  const std::string frame = EncodeFrame(Status());
  ASSERT_TRUE(stalled.Send(frame.substr(0, 3)));
  const absl::StatusOr<control::Reply> other = Call(Status());
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(other->has_status());
  EXPECT_TRUE(stalled.ClosedByServer(absl::Seconds(10)));
  EXPECT_THAT(Log(), HasSubstr("its request was not complete within 500ms"));
}

TEST_F(ControlServerTest, ConnectionIsNotTimedOutWhileTheServerIsBusyWithAnotherRequest) {
  ControlServer::Options options = DefaultOptions();
  options.io_timeout = absl::Seconds(2);
  Start(std::move(options));
  handler_.set_snapshot_wait_time(absl::Seconds(3));
  RawClient waiting(socket_path_);
  ASSERT_TRUE(waiting.Send(Status()));
  ASSERT_TRUE(waiting.ReadReply().ok());  // Accepted; its 2 s start now.
  RawClient slow(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(slow.Send(snapshot));
  absl::SleepFor(absl::Milliseconds(100));  // The snapshot is being taken.
  ASSERT_TRUE(waiting.Send(Status()));
  const absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status());
  EXPECT_TRUE(slow.ReadReply().ok());
}

TEST_F(ControlServerTest, ConnectionsBeyondTheLimitGetAnErrorAndTheOthersAreKept) {
  ControlServer::Options options = DefaultOptions();
  options.max_connections = 2;
  Start(std::move(options));
  RawClient first(socket_path_), second(socket_path_);
  // Answered: both are accepted and held.
  for (RawClient* c : {&first, &second}) {
    ASSERT_TRUE(c->Send(Status()));
    ASSERT_TRUE(c->ReadReply().ok());
  }
  RawClient third(socket_path_);
  ASSERT_TRUE(third.ok());
  const absl::StatusOr<control::Reply> refused = third.ReadReply();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(refused->error(), HasSubstr("2 control connections are open already"));
  EXPECT_TRUE(third.ClosedByServer(absl::Seconds(10)));
  ASSERT_TRUE(first.Send(Status()));
  EXPECT_TRUE(first.ReadReply().ok());
}

TEST_F(ControlServerTest, AnAnswerGivenLaterParksItsConnectionWhileOthersAreServed) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  Start();
  RawClient waiting(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("slow");
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(waiting.Send(snapshot));
  const LaterReply later = handler_.Parked(0);
  // Parked: others are served, it is not answered.
  for (int i = 0; i < 3; i++) {
    const absl::StatusOr<control::Reply> other = Call(Status());
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_TRUE(other->has_status());
  }
  EXPECT_FALSE(waiting.ReadReply(absl::Milliseconds(100)).ok());

  later.Send(FakeHandler::SnapshotDone("slow"));
  absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/written-slow");
  // Only the first reply counts; the connection goes on.
  later.Send(FakeHandler::SnapshotDone("again"));
  ASSERT_TRUE(waiting.Send(Status()));
  reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status());
}

TEST_F(ControlServerTest, AnAnswerSentBeforeTheHandlerReturnsIsDelivered) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5), /*reply_at_once=*/true);
  Start();
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("fast");
  snapshot.mutable_snapshot()->set_wait(true);
  const absl::StatusOr<control::Reply> reply = Call(snapshot);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/written-fast");
}

TEST_F(ControlServerTest, AParkedConnectionCountsAgainstMaxConnections) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  ControlServer::Options options = DefaultOptions();
  options.max_connections = 1;
  Start(std::move(options));
  RawClient waiting(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(waiting.Send(snapshot));
  const LaterReply later = handler_.Parked(0);
  const absl::StatusOr<control::Reply> refused = Call(Status());
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(refused->error(), HasSubstr("1 control connections are open already"));
  later.Send(FakeHandler::SnapshotDone(""));
  EXPECT_TRUE(waiting.ReadReply().ok());
}

TEST_F(ControlServerTest, AParkedPeerThatHangsUpIsDroppedAndItsLateAnswerIgnored) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  ControlServer::Options options = DefaultOptions();
  options.max_connections = 1;
  Start(std::move(options));
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_wait(true);
  LaterReply later = [&] {
    RawClient gone(socket_path_);
    EXPECT_TRUE(gone.Send(snapshot));
    return handler_.Parked(0);
  }();
  // Its place is free once the server saw it hang up.
  absl::StatusOr<control::Reply> reply = CallWhileBusy(Status());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status()) << reply->error();
  later.Send(FakeHandler::SnapshotDone(""));
  // The one place is still there for the next peer.
  reply = CallWhileBusy(Status());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status()) << reply->error();
}

TEST_F(ControlServerTest, AParkedConnectionGetsTheHandlersLateReplyOnceTheLimitPasses) {
  handler_.AnswerSnapshotWaitLater(absl::Milliseconds(300));
  ControlServer::Options options = DefaultOptions();
  options.io_timeout = absl::Milliseconds(100);
  Start(std::move(options));
  RawClient waiting(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_wait(true);
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(waiting.Send(snapshot));
  // Not dropped after io_timeout: parked connections wait for their limit.
  absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_GE(absl::Now() - sent, absl::Milliseconds(300));
  EXPECT_EQ(reply->error(), "snapshot not written within the limit");
  handler_.Parked(0).Send(FakeHandler::SnapshotDone("too late"));
  ASSERT_TRUE(waiting.Send(Status()));
  reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->has_status());
}

TEST_F(ControlServerTest, StopAnswersAParkedConnectionThatTheAgentIsStopping) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  Start();
  RawClient waiting(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(waiting.Send(snapshot));
  const LaterReply later = handler_.Parked(0);
  server_->Stop();
  const absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->error(), HasSubstr("the agent is stopping"));
  EXPECT_TRUE(waiting.ClosedByServer(absl::Seconds(10)));
  // Its answer after the server is gone goes nowhere.
  later.Send(FakeHandler::SnapshotDone(""));
  server_.reset();
  later.Send(FakeHandler::SnapshotDone(""));
}

// The agent's shutdown: the socket takes nothing new, but a request parked
// for work the shutdown still finishes (a snapshot --wait whose file is
// written before the agent exits) gets that work's answer, not "stopping".
TEST_F(ControlServerTest, AfterStopAcceptingAParkedConnectionGetsItsRealReplyAndNothingNewIsTaken) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  Start();
  RawClient waiting(socket_path_);
  RawClient idle(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("during shutdown");
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(waiting.Send(snapshot));
  const LaterReply later = handler_.Parked(0);
  ASSERT_TRUE(idle.ok());
  const size_t peers_before = handler_.peers().size();

  server_->StopAccepting();
  // A connection with nothing coming is closed; the socket file is gone,
  // so new peers find no agent.
  EXPECT_TRUE(idle.ClosedByServer(absl::Seconds(10)));
  struct stat st;
  EXPECT_NE(lstat(socket_path_.c_str(), &st), 0);
  const absl::StatusOr<control::Reply> refused = Call(Status());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  later.Send(FakeHandler::SnapshotDone("during shutdown"));
  const absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/written-during shutdown") << reply->error();
  // Answered, it is closed: a next request is not handled (the send may
  // already fail).
  (void)waiting.Send(Status());
  EXPECT_TRUE(waiting.ClosedByServer(absl::Seconds(10)));
  EXPECT_EQ(handler_.peers().size(), peers_before);
  server_->Stop();
}

// The agent's shutdown goes on (to the triggers still delayed) once
// StopAccepting() returns: a request the loop had taken before must have
// been handled by then, or a trigger accepted would be lost.
TEST_F(ControlServerTest, StopAcceptingReturnsOnceTheHandlerRunningMeanwhileReturned) {
  handler_.set_snapshot_wait_time(absl::Milliseconds(500));
  Start();
  RawClient client(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("in flight");
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(client.Send(snapshot));
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while (handler_.peers().empty() && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(handler_.peers().size(), 1u);

  server_->StopAccepting();
  EXPECT_EQ(handler_.handled(), 1);
  const absl::StatusOr<control::Reply> reply = client.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/done-in flight") << reply->error();
  server_->Stop();
}

// A reply the handler gave while Stop() was ending the loop is still the
// answer the parked peer gets.
TEST_F(ControlServerTest, AReplyGivenJustBeforeStopIsTheParkedConnectionsAnswer) {
  handler_.AnswerSnapshotWaitLater(absl::Minutes(5));
  Start();
  RawClient waiting(socket_path_);
  control::Request snapshot;
  snapshot.mutable_snapshot()->set_reason("last");
  snapshot.mutable_snapshot()->set_wait(true);
  ASSERT_TRUE(waiting.Send(snapshot));
  const LaterReply later = handler_.Parked(0);
  server_->StopAccepting();
  later.Send(FakeHandler::SnapshotDone("last"));
  server_->Stop();
  const absl::StatusOr<control::Reply> reply = waiting.ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->snapshot().path(), "/snapshots/written-last") << reply->error();
}

// `bytes` is exactly one frame holding a Reply.
bool ParseOneFrame(const std::string& bytes, control::Reply* reply) {
  FrameReader reader(1 << 20);
  std::string payload;
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min(bytes.size() - at, reader.room());
    if (n == 0) return false;
    reader.Append(bytes.data() + at, n);
    at += n;
  }
  return reader.Next(&payload) == FrameReader::Result::kComplete && reader.buffered() == 0 &&
         reply->ParseFromString(payload);
}

TEST_F(ControlServerTest, UnprivilegedPeerIsRefusedWithThePermissionErrorWhileRootIsServed) {
  Start();
  // The file's mode is the first gate; loosen it so that the peer reaches
  // the second one, the SO_PEERCRED check, which must hold on its own.
  ASSERT_EQ(chmod(socket_path_.c_str(), 0666), 0);
  const std::string request = EncodeFrame(Status());
  const std::string path = socket_path_;
  const absl::StatusOr<std::string> answer =
      testing::RunAs(65534, 65534, {}, [&] { return testing::ExchangeRaw(path, request); });
  ASSERT_TRUE(answer.ok()) << answer.status();
  control::Reply reply;
  ASSERT_TRUE(ParseOneFrame(*answer, &reply)) << *answer;
  EXPECT_EQ(reply.error(), "permission denied: uid 65534 is not root (no control_group is set)");
  EXPECT_FALSE(reply.has_status());
  EXPECT_TRUE(handler_.peers().empty());
  EXPECT_THAT(Log(), HasSubstr("(uid 65534): not root (no control_group is set)"));
  const absl::StatusOr<control::Reply> root = Call(Status());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(root->has_status());
}

// Without control_group only root is served, even a peer in the group the
// socket file happens to have (the agent's own: root's, as root).
TEST_F(ControlServerTest, WithoutAControlGroupAPeerInTheSocketFilesGroupIsRefused) {
  Start();
  ASSERT_EQ(chmod(socket_path_.c_str(), 0666), 0);
  struct stat st;
  ASSERT_EQ(lstat(socket_path_.c_str(), &st), 0);
  EXPECT_EQ(server_->group(), std::nullopt);
  const std::string request = EncodeFrame(Status());
  const std::string path = socket_path_;
  const absl::StatusOr<std::string> answer = testing::RunAs(
      65534, st.st_gid, {st.st_gid}, [&] { return testing::ExchangeRaw(path, request); });
  ASSERT_TRUE(answer.ok()) << answer.status();
  control::Reply reply;
  ASSERT_TRUE(ParseOneFrame(*answer, &reply)) << *answer;
  EXPECT_THAT(reply.error(), StartsWith("permission denied: uid 65534 is not root"));
  EXPECT_TRUE(handler_.peers().empty());
}

TEST_F(ControlServerTest, PeerWithTheControlGroupAmongItsGroupsIsServed) {
  ControlServer::Options options = DefaultOptions();
  options.group = 4242;
  Start(std::move(options));
  const std::string request = EncodeFrame(Status());
  const std::string path = socket_path_;
  const absl::StatusOr<std::string> answer =
      testing::RunAs(65534, 65534, {4242}, [&] { return testing::ExchangeRaw(path, request); });
  ASSERT_TRUE(answer.ok()) << answer.status();
  control::Reply reply;
  ASSERT_TRUE(ParseOneFrame(*answer, &reply)) << *answer;
  EXPECT_FALSE(reply.has_error()) << reply.error();
  EXPECT_TRUE(reply.has_status());
  ASSERT_EQ(handler_.peers().size(), 1u);
  EXPECT_EQ(handler_.peers()[0].uid, 65534u);
}

TEST_F(ControlServerTest, SocketIsMode0660AndOwnedByTheControlGroup) {
  ControlServer::Options options = DefaultOptions();
  options.group = 4242;
  Start(std::move(options));
  struct stat st;
  ASSERT_EQ(lstat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, 4242u);
  EXPECT_EQ(server_->group(), std::optional<gid_t>(4242));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The socket's mode and group are right whatever the umask, without a
// chmod by path: a symlink swapped in at its name between bind() and the
// mode change (by whoever could write the directory) redirects nothing.
TEST_F(ControlServerTest, ASymlinkSwappedInAfterBindIsNotFollowedToItsTarget) {
  const std::string target = dir_.Join("target");
  std::ofstream(target) << "precious";
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  ControlServer::Options options = DefaultOptions();
  options.group = 4242;
  const auto server =
      ControlServer::ListenForTesting(socket_path_, std::move(options), &handler_, [&] {
        ASSERT_EQ(unlink(socket_path_.c_str()), 0);
        ASSERT_EQ(symlink(target.c_str(), socket_path_.c_str()), 0);
      });
  EXPECT_FALSE(server.ok());
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_gid, getgid());
  EXPECT_EQ(ReadFile(target), "precious");
}

TEST_F(ControlServerTest, SocketIsMode0660WhateverTheUmask) {
  const mode_t old_umask = umask(0077);
  ControlServer::Options options = DefaultOptions();
  options.group = 4242;
  Start(std::move(options));
  umask(old_umask);
  struct stat st;
  ASSERT_EQ(lstat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, 4242u);
}

// Another user could plant or swap names in such a directory: refused,
// naming it, and nothing is created there.
TEST_F(ControlServerTest, ListenRefusesADirectoryOthersCanWrite) {
  for (const mode_t mode : {01777, 0775, 0757}) {
    const std::string dir = dir_.Join(absl::StrCat("open-", mode));
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    const std::string path = dir + "/control.sock";
    const auto server = ControlServer::Listen(path, DefaultOptions(), &handler_);
    ASSERT_FALSE(server.ok()) << mode;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(server.status().message(),
                HasSubstr("the control socket's directory " + dir + " can be written by others"));
    struct stat st;
    EXPECT_NE(lstat(path.c_str(), &st), 0) << "a socket was created in " << dir;
  }
}

TEST_F(ControlServerTest, ListenRefusesADirectoryOfAnotherUser) {
  const std::string dir = dir_.Join("theirs");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
  const auto server = ControlServer::Listen(dir + "/control.sock", DefaultOptions(), &handler_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(),
              HasSubstr("the control socket's directory " + dir + " belongs to uid 65534"));
}

// The directory itself is opened without following a symlink, as the run
// directory is.
TEST_F(ControlServerTest, ListenRefusesASymlinkedDirectory) {
  const std::string real = dir_.Join("real");
  const std::string link = dir_.Join("link");
  ASSERT_EQ(mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  const auto server = ControlServer::Listen(link + "/control.sock", DefaultOptions(), &handler_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(), HasSubstr(link + " is a symlink"));
  struct stat st;
  EXPECT_NE(lstat((real + "/control.sock").c_str(), &st), 0);
}

TEST_F(ControlServerTest, ListenRefusesARegularFileAndLeavesItUntouched) {
  std::ofstream(socket_path_) << "not a socket";
  ControlServer::Options options = DefaultOptions();
  options.replace_stale_socket = true;
  const auto server = ControlServer::Listen(socket_path_, std::move(options), &handler_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(), HasSubstr(socket_path_ + " is a regular file"));
  EXPECT_EQ(ReadFile(socket_path_), "not a socket");
}

TEST_F(ControlServerTest, ListenRefusesASymlinkAndLeavesItAndItsTargetUntouched) {
  const std::string target = dir_.Join("target");
  std::ofstream(target) << "precious";
  ASSERT_EQ(symlink(target.c_str(), socket_path_.c_str()), 0);
  ControlServer::Options options = DefaultOptions();
  options.replace_stale_socket = true;
  const auto server = ControlServer::Listen(socket_path_, std::move(options), &handler_);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr(socket_path_ + " is a symlink"));
  char link[4096] = {};
  ASSERT_GT(readlink(socket_path_.c_str(), link, sizeof(link) - 1), 0);
  EXPECT_EQ(std::string(link), target);
  EXPECT_EQ(ReadFile(target), "precious");
}

// A socket file left by an agent that died (bound, nobody listening).
void LeaveStaleSocket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST_F(ControlServerTest, ListenRefusesAnExistingSocketUnlessTheCallerKnowsItIsStale) {
  LeaveStaleSocket(socket_path_);
  const auto refused = ControlServer::Listen(socket_path_, DefaultOptions(), &handler_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("is another ringside agent running?"));
  ControlServer::Options options = DefaultOptions();
  options.replace_stale_socket = true;
  Start(std::move(options));
  EXPECT_TRUE(Call(Status()).ok());
}

TEST_F(ControlServerTest, StopRemovesTheSocket) {
  Start();
  server_->Stop();
  struct stat st;
  EXPECT_NE(lstat(socket_path_.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(ControlServerTest, StopLeavesASocketThatIsNoLongerItsOwn) {
  Start();
  ASSERT_EQ(unlink(socket_path_.c_str()), 0);
  LeaveStaleSocket(socket_path_);
  server_->Stop();
  struct stat st;
  ASSERT_EQ(lstat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
}

}  // namespace
}  // namespace ringside::agent
