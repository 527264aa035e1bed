#ifndef RINGSIDE_AGENT_DAEMON_AGENT_STREAM_H_
#define RINGSIDE_AGENT_DAEMON_AGENT_STREAM_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/lifecycle/agent_log.h"
#include "agent/output/compressing_sink.h"
#include "agent/output/rotating_trace_file.h"
#include "agent/session/tracing_session.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// What a killed agent left unfinished in `output_dir` (".partial" streaming
// files of this machine: FileHost::Local(machine_name)) cut back to its last whole packet and kept
// under its final name, logged. At every start, streaming or not: a shipper skips
// ".partial" files, so until then their data is as good as lost.
void RecoverAgentStreamFiles(const config::TraceConfig& config, AgentLog& log);

// The agent's streaming files (write_into_file) as its config sets them,
// named after its machine_name (else the host name):
// what a killed agent left unfinished in output_dir is kept first (logged),
// then the first file is opened. `group`: output_group.
absl::StatusOr<std::unique_ptr<RotatingTraceFile>> OpenAgentStream(
    const config::TraceConfig& config, std::optional<gid_t> group, AgentLog& log);

// The agent's streaming files and what its session streams into: the
// files, or the sink that compresses into them on the session's drain
// thread. Empty (all null) when the config does not stream.
struct AgentStream {
  std::unique_ptr<RotatingTraceFile> files;
  // Null: not compressed. Declared after `files`, which it writes into.
  std::unique_ptr<CompressingSink> compression;
  RotatingSink* sink = nullptr;  // `compression`, else `files`.
};

// write_into_file: the files (OpenAgentStream) behind the config's
// compression. An empty AgentStream when the config does not stream.
absl::StatusOr<AgentStream> OpenAgentStreamSink(const config::TraceConfig& config,
                                                std::optional<gid_t> group, AgentLog& log);

// The status reply's `streaming`: the files' figures, what the buffers
// overwrote before the drain wrote it (nothing else reads them), and the
// compression's figures when `compression` (may be null) compresses them.
void FillStreamingStatus(const RotatingTraceFile& stream, const CompressingSink* compression,
                         const TracingSession::Report& report, control::StreamingStatus* out);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_AGENT_STREAM_H_
