#include "tests/agent/testing/prometheus_tools.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/paths.h"

namespace ringside::agent::testing {

std::string PromtoolPath() { return ringside::testing::ToolsDir() + "/debs/root/usr/bin/promtool"; }

std::string PrometheusPath() {
  return ringside::testing::ToolsDir() + "/debs/root/usr/bin/prometheus";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

int ListenOnLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string HttpExchange(int port, const std::string& request, int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[16384];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

std::vector<int> ConnectIdle(int port, int n) {
  std::vector<int> fds;
  const absl::Time until = absl::Now() + absl::Seconds(30);
  for (int i = 0; i < n && absl::Now() < until; i++) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const timeval connect_timeout = {0, 200'000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connect_timeout, sizeof(connect_timeout));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      fds.push_back(fd);
    } else {
      close(fd);
    }
  }
  return fds;
}

int HttpStatus(const std::string& response) {
  // "HTTP/1.1 200 OK"
  int code = 0;
  if (response.size() < 12 || !absl::StartsWith(response, "HTTP/") ||
      !absl::SimpleAtoi(response.substr(9, 3), &code)) {
    return 0;
  }
  return code;
}

std::string HttpBody(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

std::string NodeExporterPath() {
  return ringside::testing::ToolsDir() + "/debs/root/usr/bin/prometheus-node-exporter";
}

int PromtoolCheckMetrics(const std::string& text, std::string* said) {
  const std::string path = TempPath("metrics.prom");
  std::ofstream(path) << text;
  int code = -1;
  *said = RunProgramCapture(
      "/bin/sh", {"-c", "\"$0\" check metrics < \"$1\" 2>&1", PromtoolPath(), path}, &code);
  return code;
}

namespace {

// Each sample line's series (name and labels) and value.
template <typename F>
void ForEachSample(const std::string& text, F f) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    double value = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &value)) continue;
    f(line.substr(0, space), value);
  }
}

}  // namespace

std::optional<double> SampleValue(const std::string& text, const std::string& series) {
  std::optional<double> found;
  ForEachSample(text, [&](absl::string_view s, double v) {
    if (s == series) found = v;
  });
  return found;
}

double SumOf(const std::string& text, const std::string& name) {
  double sum = 0;
  ForEachSample(text, [&](absl::string_view s, double v) {
    if (s == name || absl::StartsWith(s, name + "{")) sum += v;
  });
  return sum;
}

}  // namespace ringside::agent::testing
