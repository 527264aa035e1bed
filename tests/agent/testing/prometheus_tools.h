#ifndef RINGSIDE_TESTS_AGENT_TESTING_PROMETHEUS_TOOLS_H_
#define RINGSIDE_TESTS_AGENT_TESTING_PROMETHEUS_TOOLS_H_

#include <optional>
#include <string>
#include <vector>

namespace ringside::agent::testing {

// Prometheus' own programs from Debian's packages, which `make deps`
// unpacks under the tools directory (installing them would start their
// services): promtool and node_exporter.
std::string PromtoolPath();
std::string NodeExporterPath();
std::string PrometheusPath();

// A port on 127.0.0.1 that nobody listens on now.
int FreePort();

// A socket listening on 127.0.0.1:`port` (taking it from another
// listener), or -1; the caller closes it.
int ListenOnLoopback(int port);

// Sends `request` (raw bytes) to 127.0.0.1:`port` and returns what came
// back until the server closed the connection or `timeout_ms` passed ("" if
// the connection failed).
std::string HttpExchange(int port, const std::string& request, int timeout_ms = 10000);
// Up to `n` connections to 127.0.0.1:`port` that send nothing, opened
// within 30 s (each connect gives up after 200 ms: a full backlog); the
// caller closes them.
std::vector<int> ConnectIdle(int port, int n);
// The status code of an HTTP response (0 if it is none).
int HttpStatus(const std::string& response);
// Its body (after the blank line).
std::string HttpBody(const std::string& response);

// `promtool check metrics` of `text`: its exit code, and what it said.
int PromtoolCheckMetrics(const std::string& text, std::string* said);

// The value of the sample `series` (a name with its labels as the text
// has them, `ringside_events_total{source="linux.bpf"}`), or nullopt.
std::optional<double> SampleValue(const std::string& text, const std::string& series);
// The sum of every sample of the metric `name` (all its label sets); 0
// when it has none.
double SumOf(const std::string& text, const std::string& name);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_PROMETHEUS_TOOLS_H_
