#include "agent/config_loader.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace ringside::agent {
namespace {

constexpr char kDefaultConfig[] = R"pb(
  buffers { size_kb: 65536 fill_policy: RING_BUFFER }
  data_sources {
    config {
      name: "linux.bpf"
      target_buffer: 0
      bpf_config { ring_size_kb: 4096 drain_period_ms: 100 }
    }
  }
  data_sources {
    config {
      name: "linux.ftrace"
      target_buffer: 0
      ftrace_config {
        ftrace_events: "sched/sched_process_free"
        ftrace_events: "power/cpu_frequency"
        ftrace_events: "power/cpu_idle"
        bpf_fallback_events: "sched/sched_switch"
        bpf_fallback_events: "sched/sched_waking"
        bpf_fallback_events: "sched/sched_wakeup_new"
        bpf_fallback_events: "sched/sched_process_fork"
        bpf_fallback_events: "sched/sched_process_exec"
        bpf_fallback_events: "sched/sched_process_exit"
        bpf_fallback_events: "task/task_newtask"
        bpf_fallback_events: "task/task_rename"
        buffer_size_kb: 4096
        drain_period_ms: 250
      }
    }
  }
  duration_ms: 10000
  flush_period_ms: 1000
  durable_buffer_size_kb: 2048
)pb";

// Collects the first parse error with its position (1-based for humans).
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty())
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

const std::vector<std::string>& KnownDataSources() {
  static const auto* known = new std::vector<std::string>{"linux.bpf", "linux.ftrace"};
  return *known;
}

absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name) {
  config::TraceConfig cfg;
  ErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &cfg)) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", errors.error()));
  }
  if (cfg.buffers_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": no buffers { size_kb: ... } section: at least one is needed"));
  }
  for (int i = 0; i < cfg.buffers_size(); i++) {
    if (cfg.buffers(i).size_kb() < 4) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": buffers[", i, "].size_kb is ",
                                                     cfg.buffers(i).size_kb(),
                                                     ": it must be at least 4 (KiB)"));
    }
  }
  for (int i = 0; i < cfg.data_sources_size(); i++) {
    const config::DataSourceConfig& ds = cfg.data_sources(i).config();
    bool known = false;
    for (const std::string& k : KnownDataSources()) known |= ds.name() == k;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ": data_sources[", i, "].config.name '", ds.name(),
                       "' is not a data source; known: ", absl::StrJoin(KnownDataSources(), ", ")));
    }
    if (ds.target_buffer() >= static_cast<uint32_t>(cfg.buffers_size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ": data_sources[", i, "].config.target_buffer is ",
                       ds.target_buffer(), " but there are only ", cfg.buffers_size(), " buffers"));
    }
    if (ds.name() == "linux.ftrace" && ds.ftrace_config().ftrace_events_size() == 0 &&
        ds.ftrace_config().bpf_fallback_events_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_name, ": data_sources[", i,
          "]: linux.ftrace needs ftrace_config { ftrace_events: \"group/name\" ... } (or "
          "bpf_fallback_events)"));
    }
  }
  // Streaming without flushes leaves what the writers hold in open chunks
  // out of the file until the end, and Perfetto's importer warns about such
  // a config (config_write_into_file_no_flush). An explicit 0 is kept.
  if (cfg.write_into_file() && !cfg.has_flush_period_ms()) {
    cfg.set_flush_period_ms(kDefaultStreamingFlushPeriodMs);
  }
  return cfg;
}

absl::StatusOr<config::TraceConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

config::TraceConfig DefaultRecordConfig() {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(kDefaultConfig, "<embedded default>");
  return cfg.ok() ? *cfg : config::TraceConfig();
}

}  // namespace ringside::agent
