#include "agent/config/config_loader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_validation.h"
#include "agent/config/defaults.h"
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
      bpf_config {
        drain_period_ms: 100
        stacks {}
      }
    }
  }
  data_sources {
    config {
      name: "linux.ftrace"
      target_buffer: 0
      ftrace_config {
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
        bpf_fallback_events: "sched/sched_process_free"
        drain_period_ms: 250
      }
    }
  }
  data_sources { config { name: "linux.sys_stats" target_buffer: 0 } }
  data_sources { config { name: "linux.process_stats" target_buffer: 0 } }
  duration_ms: 10000
  flush_period_ms: 1000
  durable_buffer_size_kb: 2048
  staging_budget_kb: 32768
)pb";

// Collects the first parse error with its position (1-based for humans).
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
    // The parser names the token it found, which at the end is none.
    if (absl::EndsWith(message, "got: ")) {
      absl::StrAppend(&error_, "the end of the file (is a '}' missing?)");
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::Status ValidateConfig(const config::TraceConfig& cfg, const std::string& file_name) {
  if (cfg.buffers_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": no buffers { size_kb: ... } section: at least one is needed"));
  }
  if (absl::Status st = CheckConfig(cfg, ThisMachine(), file_name, nullptr); !st.ok()) return st;
  return CheckEffectiveConfig(cfg, file_name);
}

absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name) {
  return ParseConfig(text, file_name, ThisMachine());
}

absl::StatusOr<config::TraceConfig> ParseConfig(const std::string& text,
                                                const std::string& file_name,
                                                const MachineLimits& machine) {
  config::TraceConfig cfg;
  ErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  google::protobuf::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, &cfg)) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", errors.error()));
  }
  if (cfg.buffers_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": no buffers { size_kb: ... } section: at least one is needed"));
  }
  if (absl::Status st = CheckConfig(cfg, machine, file_name, &tree); !st.ok()) return st;
  ApplyDefaults(&cfg);
  return cfg;
}

absl::StatusOr<config::TraceConfig> LoadConfigFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::Status(
        err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kPermissionDenied,
        absl::StrCat("cannot read config ", path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read config ", path, ": it is ", S_ISDIR(st.st_mode) ? "a directory" : "not a file",
        "; -c takes a config file in protobuf text format"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot read config ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

config::TraceConfig DefaultRecordConfig() {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(kDefaultConfig, "<embedded default>");
  return cfg.ok() ? *cfg : config::TraceConfig();
}

config::TraceConfig DefaultAgentConfig() {
  // The events of record's default, kept until a snapshot asks for them
  // rather than for 10 s, and a durable store that names every process of
  // a machine that runs for months.
  config::TraceConfig cfg = DefaultRecordConfig();
  cfg.clear_duration_ms();
  cfg.set_durable_buffer_size_kb(4096);
  // Its files live on other people's disks and are copied off after an
  // incident: zstd at its default level, as the shipped agent.pbtxt sets
  // (a third of the size for 3 ms of CPU a MB; docs/config.md).
  // Perfetto reads it from v58; a config can ask for deflate or none.
  cfg.mutable_compression()->mutable_zstd();
  // What a flight recorder is for: the seconds before an OOM kill or a
  // crash, and one second after it, written by themselves. A crash loop
  // makes one snapshot a minute (the default cooldown), at most 24 a day,
  // and the newest 10 files are kept (each about the ring's size).
  using Trigger = config::TraceConfig::TriggerConfig::Trigger;
  config::TraceConfig::TriggerConfig* triggers = cfg.mutable_trigger_config();
  triggers->set_trigger_mode(config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT);
  for (const auto& [name, kind] :
       {std::pair<const char*, Trigger::Incident::Kind>{"oom_kill", Trigger::Incident::OOM_KILL},
        {"crash", Trigger::Incident::FATAL_SIGNAL}}) {
    Trigger* t = triggers->add_triggers();
    t->set_name(name);
    t->set_stop_delay_ms(1000);
    t->set_max_per_24_h(24);
    t->mutable_incident()->add_kinds(kind);
  }
  ApplyAgentDefaults(&cfg);
  return cfg;
}

}  // namespace ringside::agent
