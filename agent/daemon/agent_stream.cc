#include "agent/daemon/agent_stream.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/output/file_retention.h"
#include "agent/tracefile/packet_compression.h"

namespace ringside::agent {

void RecoverAgentStreamFiles(const config::TraceConfig& config, AgentLog& log) {
  const RecoveredFiles r =
      RecoverPartialStreamFiles(config.output_dir(), FileHost::Local(config.machine_name()));
  if (r.files > 0) {
    log.Notice(absl::StrCat("kept ", r.files, " streaming file(s) a killed agent left in ",
                            config.output_dir(), " unfinished (", r.bytes_cut,
                            " bytes of a packet cut short removed)"));
  }
}

absl::StatusOr<std::unique_ptr<RotatingTraceFile>> OpenAgentStream(
    const config::TraceConfig& config, std::optional<gid_t> group, AgentLog& log) {
  RecoverAgentStreamFiles(config, log);
  RotatingTraceFile::Options o;
  o.dir = config.output_dir();
  o.hostname = FileHost::Local(config.machine_name());
  o.max_file_bytes = config.max_file_size_bytes();
  o.max_file_age = absl::Milliseconds(config.file_rotation_period_ms());
  o.max_files = config.max_files();
  o.max_total_bytes = config.max_total_bytes();
  o.group = group;
  return RotatingTraceFile::Open(o);
}

absl::StatusOr<AgentStream> OpenAgentStreamSink(const config::TraceConfig& config,
                                                std::optional<gid_t> group, AgentLog& log) {
  AgentStream stream;
  if (!config.write_into_file()) return stream;
  absl::StatusOr<std::unique_ptr<RotatingTraceFile>> files = OpenAgentStream(config, group, log);
  if (!files.ok()) return files.status();
  stream.files = std::move(*files);
  stream.sink = stream.files.get();
  if (const PacketCompression c = PacketCompressionOf(config); c.codec != PacketCodec::kNone) {
    absl::StatusOr<std::unique_ptr<PacketCompressor>> compressor = PacketCompressor::Create(c);
    if (!compressor.ok()) return compressor.status();
    stream.compression = std::make_unique<CompressingSink>(stream.sink, std::move(*compressor));
    stream.sink = stream.compression.get();
  }
  return stream;
}

void FillStreamingStatus(const RotatingTraceFile& stream, const CompressingSink* compression,
                         const TracingSession::Report& report, control::StreamingStatus* out) {
  const RotatingTraceFile::Stats st = stream.stats();
  out->set_path(st.path);
  out->set_bytes(st.bytes);
  out->set_files_finished(st.files_finished);
  out->set_bytes_finished(st.bytes_finished);
  out->set_files_deleted(st.files_deleted);
  out->set_bytes_deleted(st.bytes_deleted);
  uint64_t lost = 0;
  for (const TracingSession::BufferReport& b : report.buffers) lost += b.stats.bytes_overwritten;
  out->set_bytes_lost(lost);
  out->set_write_errors(st.write_errors);
  out->set_last_error(st.last_error);
  const SidecarWriter::Stats sidecars = stream.sidecar_stats();
  out->set_sidecars_written(sidecars.written);
  out->set_sidecars_failed(sidecars.failed);
  out->set_last_sidecar_error(sidecars.last_error);
  if (compression != nullptr) {
    out->set_codec(PacketCodecName(compression->compression().codec));
    out->set_compressed_in_bytes(compression->bytes_in());
    out->set_compressed_out_bytes(compression->bytes_out());
    out->set_compression_cpu_ns(compression->cpu_ns());
  }
}

}  // namespace ringside::agent
