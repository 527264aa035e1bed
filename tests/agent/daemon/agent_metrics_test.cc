#include "agent/daemon/agent_metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

class AgentMetricsTest : public ::testing::Test {
 protected:
  ~AgentMetricsTest() override { close(null_fd_); }

  const int null_fd_ = open("/dev/null", O_WRONLY | O_CLOEXEC);
  AgentLog log_{null_fd_};
  AgentMetrics metrics_{&log_, [] { return control::StatusReply(); }};
};

TEST_F(AgentMetricsTest, NoMetricsListenStartsNoListenerAndShowsNone) {
  EXPECT_FALSE(metrics_.StartListener(config::TraceConfig()).has_value());
}

// Metrics never stop a flight recorder: a listener that cannot start says
// why in status, and counts nothing.
TEST_F(AgentMetricsTest, AListenerThatCannotStartShowsItsErrorInStatus) {
  config::TraceConfig config;
  config.set_metrics_listen("localhost:9464");
  const std::optional<AgentMetrics::Listener> listener = metrics_.StartListener(config);
  ASSERT_TRUE(listener.has_value());
  EXPECT_EQ(listener->counters, nullptr);
  control::StatusReply reply;
  AgentMetrics::FillStatus(*listener, &reply);
  EXPECT_EQ(reply.metrics_listener().listen(), "localhost:9464");
  EXPECT_EQ(reply.metrics_listener().listening(), "");
  EXPECT_NE(reply.metrics_listener().error(), "");
}

TEST_F(AgentMetricsTest, AListenerShowsTheAddressItBoundAndItsCounters) {
  config::TraceConfig config;
  config.set_metrics_listen("127.0.0.1:0");
  const std::optional<AgentMetrics::Listener> listener = metrics_.StartListener(config);
  ASSERT_TRUE(listener.has_value());
  ASSERT_NE(listener->counters, nullptr);
  control::StatusReply reply;
  AgentMetrics::FillStatus(*listener, &reply);
  EXPECT_EQ(reply.metrics_listener().error(), "");
  EXPECT_NE(reply.metrics_listener().listening(), "");
  EXPECT_NE(reply.metrics_listener().listening(), "127.0.0.1:0");
  EXPECT_EQ(reply.metrics_listener().requests(), 0u);
}

// The first write is done when StartTextfile() returns, so that the file is
// there once the agent says it is ready.
TEST_F(AgentMetricsTest, TheTextfileIsWrittenBeforeStartTextfileReturns) {
  ScratchDir dir;
  config::TraceConfig config;
  config.set_metrics_textfile(dir.path());
  metrics_.StartTextfile(config);
  struct stat st;
  EXPECT_EQ(stat(dir.Join(MetricsTextfile::kFileName).c_str(), &st), 0);
  metrics_.Stop();
}

}  // namespace
}  // namespace ringside::agent
