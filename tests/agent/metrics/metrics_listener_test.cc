#include "agent/metrics/metrics_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/config/listen_address.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/prometheus_tools.h"

namespace ringside::agent {
namespace {

using testing::HttpBody;
using testing::HttpExchange;
using testing::HttpStatus;

TEST(ListenAddressTest, NumericAddressesAndPortsOnly) {
  absl::StatusOr<ListenAddress> a = ParseListenAddress("0.0.0.0:9464");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->addr.ss_family, AF_INET);
  EXPECT_EQ(a->port, 9464);
  a = ParseListenAddress("[::1]:80");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->addr.ss_family, AF_INET6);
  a = ParseListenAddress(":9464");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->any);
  for (const char* bad : {"9464", "localhost:9464", "0.0.0.0:", "0.0.0.0:65536", "0.0.0.0:-1",
                          "[::1:80", "::1:80", "1.2.3:80", "0.0.0.0:9464x", ""}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
  EXPECT_TRUE(absl::StrContains(ParseListenAddress("localhost:9464").status().message(),
                                "names are not looked up"));
}

class MetricsListenerTest : public ::testing::Test {
 protected:
  // A scrape renders the status at most once an hour here: no test's
  // scrapes are an hour apart, however loaded the machine.
  void SetUp() override { Listen(absl::Hours(1)); }
  void Listen(absl::Duration min_render_interval) {
    listener_.reset();
    absl::StatusOr<std::unique_ptr<MetricsListener>> l =
        MetricsListener::Start({.listen = "127.0.0.1:0",
                                .metrics = {.kernel = "test"},
                                .status =
                                    [this] {
                                      control::StatusReply s;
                                      s.set_version("0.1.0-test");
                                      control::SourceStatus* src = s.add_sources();
                                      src->set_name("linux.bpf");
                                      src->set_events(++scrapes_);
                                      return s;
                                    },
                                .min_render_interval = min_render_interval});
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
    ASSERT_NE(listener_->port(), 0);
  }
  std::string Get(const std::string& path, const std::string& extra = "") {
    return HttpExchange(listener_->port(), absl::StrCat("GET ", path,
                                                        " HTTP/1.1\r\nHost: x\r\n"
                                                        "Connection: close\r\n",
                                                        extra, "\r\n"));
  }

  std::atomic<uint64_t> scrapes_{0};
  std::unique_ptr<MetricsListener> listener_;
};

TEST_F(MetricsListenerTest, ServesTheMetricsOnGetMetricsOnly) {
  const std::string ok = Get("/metrics");
  EXPECT_EQ(HttpStatus(ok), 200) << ok;
  EXPECT_TRUE(absl::StrContains(ok, "text/plain; version=0.0.4")) << ok;
  const std::string body = HttpBody(ok);
  EXPECT_EQ(testing::SampleValue(body, R"(ringside_events_total{source="linux.bpf"})"), 1) << body;
  std::string said;
  EXPECT_EQ(testing::PromtoolCheckMetrics(body, &said), 0) << said;
  // A scrape within the interval of the last render gets its text.
  const std::string events = R"(ringside_events_total{source="linux.bpf"})";
  EXPECT_EQ(testing::SampleValue(HttpBody(Get("/metrics")), events), 1);
  EXPECT_EQ(HttpStatus(Get("/metrics?x=1")), 200) << "query arguments are not part of the path";

  EXPECT_EQ(HttpStatus(Get("/")), 404);
  EXPECT_EQ(HttpStatus(Get("/metrics/../etc/passwd")), 404);
  const std::string post = HttpExchange(listener_->port(),
                                        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                        "Connection: close\r\n\r\nabc");
  EXPECT_EQ(HttpStatus(post), 405) << post;
  EXPECT_TRUE(absl::StrContains(post, "Allow: GET, HEAD")) << post;
  EXPECT_EQ(HttpStatus(Get("/metrics", "Content-Length: 5\r\n")), 413);
  EXPECT_EQ(scrapes_.load(), 1u) << "a render is reused within its interval";
}

// A scrape after the interval asks for the status again. (Before, with the
// default second, a scrape meant to come within it came after it on a
// loaded machine: promtool, run between the two, took longer.)
TEST_F(MetricsListenerTest, AScrapeAfterTheIntervalRendersTheStatusAgain) {
  Listen(absl::Milliseconds(50));
  const std::string events = R"(ringside_events_total{source="linux.bpf"})";
  EXPECT_EQ(testing::SampleValue(HttpBody(Get("/metrics")), events), 1);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(testing::SampleValue(HttpBody(Get("/metrics")), events), 2);
  // Past the interval again, requests for anything else render nothing.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(HttpStatus(Get("/")), 404);
  EXPECT_EQ(HttpStatus(Get("/metrics", "Content-Length: 5\r\n")), 413);
  EXPECT_EQ(scrapes_.load(), 2u) << "only GET /metrics renders the status";
}

TEST_F(MetricsListenerTest, BadClientsAreAnsweredOrDroppedAndOthersStillServed) {
  // Headers past the connection's memory: refused, never grown into.
  const std::string huge =
      Get("/metrics", absl::StrCat("X-Big: ", std::string(64 << 10, 'a'), "\r\n"));
  EXPECT_NE(HttpStatus(huge), 200) << huge.substr(0, 200);
  // Garbage.
  const std::string garbage =
      HttpExchange(listener_->port(), std::string("\x16\x03\x01\0\xff", 5), /*timeout_ms=*/2000);
  EXPECT_NE(HttpStatus(garbage), 200);
  // Slow clients that send nothing, as many as the limit: the next one is
  // turned away or waits, and once they go, scrapes are served again.
  const std::vector<int> idle = testing::ConnectIdle(listener_->port(), 1000);
  EXPECT_GT(idle.size(), MetricsListener::kMaxConnections);
  for (int fd : idle) close(fd);
  std::string ok;
  for (int i = 0; i < 100 && HttpStatus(ok) != 200; i++) {
    ok = Get("/metrics");
    if (HttpStatus(ok) != 200) usleep(100'000);
  }
  EXPECT_EQ(HttpStatus(ok), 200) << "1,000 connections came and went; then: " << ok;
}

TEST(MetricsListenerStartTest, AnAddressTakenIsNamed) {
  const int port = testing::FreePort();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  absl::StatusOr<std::unique_ptr<MetricsListener>> l = MetricsListener::Start(
      {.listen = absl::StrCat("127.0.0.1:", port), .metrics = {}, .status = [] {
         return control::StatusReply();
       }});
  close(fd);
  ASSERT_FALSE(l.ok());
  EXPECT_TRUE(absl::StrContains(l.status().message(), absl::StrCat("127.0.0.1:", port)))
      << l.status();
  EXPECT_TRUE(absl::StrContains(l.status().message(), "in use")) << l.status();
}

}  // namespace
}  // namespace ringside::agent
