#include "agent/control/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "agent/control/control_frame.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

// A bound socket at `path`; listening when `listen_too`. -1 on failure.
int BindSocket(const std::string& path, bool listen_too) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listen_too && listen(fd, 4) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

// An "agent" that answers one connection with fixed bytes, then closes it.
class ScriptedAgent {
 public:
  ScriptedAgent(const std::string& path, std::string answer)
      : fd_(BindSocket(path, true)), answer_(std::move(answer)) {
    thread_ = std::thread([this] {
      const int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      pollfd p = {conn, POLLIN, 0};
      char buf[256];
      if (poll(&p, 1, 5000) > 0) (void)!recv(conn, buf, sizeof(buf), 0);
      (void)!send(conn, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      close(conn);
    });
  }
  ~ScriptedAgent() {
    thread_.join();
    close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

 private:
  const int fd_;
  const std::string answer_;
  std::thread thread_;
};

class CallAgentTest : public ::testing::Test {
 protected:
  absl::StatusOr<control::Reply> Call(absl::Duration timeout = absl::Seconds(10)) {
    control::Request request;
    request.mutable_status();
    return CallAgent(path_, request, timeout);
  }

  ScratchDir dir_;
  const std::string path_ = dir_.Join("control.sock");
};

TEST_F(CallAgentTest, MissingSocketSaysNoAgentIsListening) {
  const absl::StatusOr<control::Reply> reply = Call();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reply.status().message(),
            "no ringside agent is listening on " + path_ + " (no such file)");
}

TEST_F(CallAgentTest, SocketOfADeadAgentSaysNoAgentIsListening) {
  const int fd = BindSocket(path_, /*listen_too=*/false);
  ASSERT_GE(fd, 0);
  const absl::StatusOr<control::Reply> reply = Call();
  close(fd);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reply.status().message(), "no ringside agent is listening on " + path_);
}

TEST_F(CallAgentTest, SocketTheUserMayNotOpenIsPermissionDenied) {
  const int fd = BindSocket(path_, /*listen_too=*/true);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(chmod(path_.c_str(), 0660), 0);
  const std::string path = path_;
  // The body runs on a thread of the test process: it may use CallAgent.
  const absl::StatusOr<std::string> child = testing::RunAs(65534, 65534, {}, [&] {
    control::Request request;
    request.mutable_status();
    const absl::StatusOr<control::Reply> reply = CallAgent(path, request, absl::Seconds(5));
    return reply.status().ToString();
  });
  close(fd);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(*child, "PERMISSION_DENIED: permission denied on " + path_ +
                        ": only root and members of the agent's control group may use it");
}

TEST_F(CallAgentTest, SilentAgentTimesOut) {
  // Listening, so the connection is made, but nobody ever answers.
  const int fd = BindSocket(path_, /*listen_too=*/true);
  ASSERT_GE(fd, 0);
  const absl::StatusOr<control::Reply> reply = Call(absl::Milliseconds(200));
  close(fd);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(reply.status().message(), "the agent on " + path_ + " did not reply within 200ms");
}

TEST_F(CallAgentTest, OversizedReplyIsRefusedWithoutReadingIt) {
  ScriptedAgent agent(path_, std::string("\xff\xff\xff\xff", 4));
  ASSERT_TRUE(agent.ok());
  const absl::StatusOr<control::Reply> reply = Call();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reply.status().message(),
              HasSubstr("sent a reply of 4294967295 bytes, over the limit of 16777216"));
}

TEST_F(CallAgentTest, ReplyThatDoesNotParseIsDataLoss) {
  ScriptedAgent agent(path_, std::string("\x03\x00\x00\x00\xff\xff\xff", 7));
  ASSERT_TRUE(agent.ok());
  const absl::StatusOr<control::Reply> reply = Call();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reply.status().message(), HasSubstr("sent a reply of 3 bytes that does not parse"));
}

TEST_F(CallAgentTest, AgentThatClosesWithoutAnsweringIsUnavailable) {
  ScriptedAgent agent(path_, "");
  ASSERT_TRUE(agent.ok());
  const absl::StatusOr<control::Reply> reply = Call();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr("closed the connection before replying"));
}

TEST_F(CallAgentTest, ReplyWithAnErrorIsReturnedAsTheAgentsAnswer) {
  control::Reply refused;
  refused.set_error("permission denied: uid 1000 is not root or in gid 0");
  ScriptedAgent agent(path_, EncodeFrame(refused));
  ASSERT_TRUE(agent.ok());
  const absl::StatusOr<control::Reply> reply = Call();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), refused.error());
}

TEST_F(CallAgentTest, PathTooLongForAUnixSocketIsInvalidArgument) {
  control::Request request;
  request.mutable_status();
  const absl::StatusOr<control::Reply> reply =
      CallAgent("/run/" + std::string(200, 'x'), request, absl::Seconds(1));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside::agent
