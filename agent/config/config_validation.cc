#include "agent/config/config_validation.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/defaults.h"
#include "agent/config/internal/config_validator.h"
#include "base/listen_address.h"
#include "google/protobuf/text_format.h"

namespace ringside::agent {

namespace internal {

void CheckCgroupPath(const std::string& path, const FieldPath& at, Validator* v) {
  if (path.empty() || path[0] != '/' || absl::StrContains(path, "/../") ||
      absl::EndsWith(path, "/..") || path.size() > kMaxCgroupPathBytes) {
    v->Fail(at, absl::StrCat("is '", absl::CHexEscape(path),
                             "': a cgroup's path below the cgroup2 mount, starting with '/' "
                             "(\"/system.slice/nginx.service\"), without '..', at most ",
                             kMaxCgroupPathBytes, " bytes"));
  }
}

}  // namespace internal

namespace {

using internal::CheckCgroupPath;
using internal::CheckDataSource;
using internal::CheckEveryBufferIsWritten;
using internal::Child;
using internal::FieldPath;
using internal::Kb;
using internal::Validator;

// The first directory of `path` (absolute), or `path` itself when
// `with_last`, that exists and is not a directory: the agent cannot create
// anything below it. "" when there is none (what is missing is created).
std::string FirstNotADirectory(const std::string& path, bool with_last) {
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    if (end == std::string::npos && !with_last) return "";
    const std::string prefix = path.substr(0, end);
    struct stat st;
    if (stat(prefix.c_str(), &st) != 0) return "";
    if (!S_ISDIR(st.st_mode)) return prefix;
    if (end == std::string::npos) return "";
  }
}

void CheckBufferSizes(const config::TraceConfig& cfg, Validator* v) {
  for (int i = 0; i < cfg.buffers_size(); i++) {
    const uint64_t kb = cfg.buffers(i).size_kb();
    if (kb < kMinBufferSizeKb || kb > kMaxBufferSizeKb) {
      v->Fail({{"buffers", i}, {"size_kb", -1}},
              absl::StrCat("is ", kb, ": it must be at least ", kMinBufferSizeKb, " and at most ",
                           kMaxBufferSizeKb, " (4 GiB less a page)"));
    }
  }
}

void CheckStagingBudget(const config::TraceConfig& cfg, uint64_t memory_kb, Validator* v) {
  if (!cfg.has_staging_budget_kb()) return;
  const uint64_t kb = cfg.staging_budget_kb();
  if (kb < kMinStagingBudgetKb || kb > kMaxStagingBudgetKb) {
    v->Fail({{"staging_budget_kb", -1}},
            absl::StrCat("is ", kb, ": the staging memory of the whole machine, at least ",
                         kMinStagingBudgetKb, " (", Kb(kMinStagingBudgetKb), ") and at most ",
                         kMaxStagingBudgetKb, " (", Kb(kMaxStagingBudgetKb), ")"));
  } else if (memory_kb > 0 && kb > memory_kb / 2) {
    v->Fail({{"staging_budget_kb", -1}},
            absl::StrCat("is ", kb, ": ", Kb(kb), " exceed half of this machine's ", Kb(memory_kb),
                         " of memory"));
  }
}

void CheckCompression(const config::TraceConfig& cfg, Validator* v) {
  if (cfg.has_compression() && cfg.compression().has_zstd() == cfg.compression().has_deflate()) {
    v->Fail({{"compression", -1}},
            absl::StrCat(cfg.compression().has_zstd() ? "names both codecs" : "names no codec",
                         ": write compression { zstd {} } or compression { deflate {} }"));
  }
  if (cfg.compression().has_zstd()) {
    const int level = cfg.compression().zstd().level();
    if (level < 0 || level > 19) {
      v->Fail({{"compression", -1}, {"zstd", -1}, {"level", -1}},
              absl::StrCat("is ", level, ": zstd levels go from 1 to 19 (0 or unset: 3)"));
    }
  }
}

void CheckMachineName(const config::TraceConfig& cfg, Validator* v) {
  if (!cfg.has_machine_name()) return;
  const std::string& name = cfg.machine_name();
  const bool printable = std::all_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (name.empty() || name.size() > kMaxMachineNameBytes || !printable) {
    v->Fail({{"machine_name", -1}},
            absl::StrCat("is '", absl::CHexEscape(name), "': a name of 1 to ", kMaxMachineNameBytes,
                         " printable ASCII characters"));
  }
}

void CheckBootInstance(const config::TraceConfig& cfg, Validator* v) {
  const std::string& name = cfg.boot_instance();
  const bool printable = std::all_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f && c != '/';
  });
  // ringside-*: the names of ringside's own instances, which a later
  // ringside removes once nobody holds them.
  if (!printable || name.size() > 255 || name == "." || name == ".." ||
      absl::StartsWith(name, "ringside-")) {
    v->Fail({{"boot_instance", -1}},
            absl::StrCat("is '", absl::CHexEscape(name),
                         "': the name of an ftrace instance (instances/<name>), printable ASCII "
                         "without spaces or '/', not ringside-* (ringside's own instances); "
                         "\"\" records into none"));
  }
}

void CheckConsumerCpuPercent(const config::TraceConfig& cfg, Validator* v) {
  if (cfg.max_consumer_cpu_percent() > kMaxConsumerCpuPercent) {
    v->Fail({{"max_consumer_cpu_percent", -1}},
            absl::StrCat("is ", cfg.max_consumer_cpu_percent(), ": percent of one CPU, 1 to ",
                         kMaxConsumerCpuPercent, " (0: no limit)"));
  }
}

// The agent's paths: relative ones would depend on the directory it was
// started from, which a service manager does not promise; a file where a
// directory must be fails here, not once the agent has started its
// sources.
// The C library would read a path only up to a NUL byte: another path.
void CheckPathsHoldNoNul(const config::TraceConfig& cfg, Validator* v) {
  for (const auto& [name, path] :
       {std::pair<const char*, const std::string&>{"output_path", cfg.output_path()},
        {"output_dir", cfg.output_dir()},
        {"control_socket", cfg.control_socket()},
        {"metrics_textfile", cfg.metrics_textfile()}}) {
    if (path.find('\0') != std::string::npos) {
      v->Fail({{name, -1}}, absl::StrCat("is '", absl::CHexEscape(path),
                                         "', which holds a NUL byte: a path cannot"));
    }
  }
}

void CheckOutputDir(const config::TraceConfig& cfg, Validator* v) {
  if (!cfg.has_output_dir()) return;
  if (cfg.output_dir().empty() || cfg.output_dir()[0] != '/') {
    v->Fail({{"output_dir", -1}}, absl::StrCat("is '", cfg.output_dir(), "': an absolute path"));
  } else if (const std::string file = FirstNotADirectory(cfg.output_dir(), true); !file.empty()) {
    v->Fail(
        {{"output_dir", -1}},
        absl::StrCat("is '", absl::CHexEscape(cfg.output_dir()), "', but ", absl::CHexEscape(file),
                     " is not a directory: a directory, or a path the agent can create "
                     "one at"));
  }
}

// node_exporter's directory: it must be there already (the agent makes
// only directories of its own).
void CheckMetricsTextfile(const config::TraceConfig& cfg, Validator* v) {
  if (!cfg.has_metrics_textfile()) return;
  struct stat st;
  if (cfg.metrics_textfile().empty() || cfg.metrics_textfile()[0] != '/') {
    v->Fail({{"metrics_textfile", -1}},
            absl::StrCat("is '", absl::CHexEscape(cfg.metrics_textfile()),
                         "': the absolute path of node_exporter's textfile directory"));
  } else if (stat(cfg.metrics_textfile().c_str(), &st) != 0 && errno != ENOENT &&
             errno != ENOTDIR) {
    v->Fail({{"metrics_textfile", -1}},
            absl::StrCat("is '", absl::CHexEscape(cfg.metrics_textfile()),
                         "', which cannot be looked at: ", std::strerror(errno)));
  } else if (stat(cfg.metrics_textfile().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    v->Fail({{"metrics_textfile", -1}},
            absl::StrCat("is '", absl::CHexEscape(cfg.metrics_textfile()),
                         "', which is not a directory: the directory node_exporter's "
                         "--collector.textfile.directory names"));
  }
}

// metrics_per_cpu without metrics_textfile or metrics_listen:
// ValidateEffective, once --metrics-listen is merged in.
void CheckMetricsPeriodAndListen(const config::TraceConfig& cfg, Validator* v) {
  if (cfg.has_metrics_period_ms() && (cfg.metrics_period_ms() < kMinMetricsPeriodMs ||
                                      cfg.metrics_period_ms() > kMaxMetricsPeriodMs)) {
    v->Fail({{"metrics_period_ms", -1}},
            absl::StrCat("is ", cfg.metrics_period_ms(), ": from ", kMinMetricsPeriodMs, " to ",
                         kMaxMetricsPeriodMs, " (an hour); unset: ", kDefaultMetricsPeriodMs));
  }
  if (!cfg.has_metrics_textfile() && cfg.has_metrics_period_ms()) {
    v->Fail({{"metrics_period_ms", -1}},
            "is set without metrics_textfile: it applies only to the metrics the agent writes "
            "there; set metrics_textfile or remove it");
  }
  if (cfg.has_metrics_listen()) {
    if (absl::StatusOr<base::ListenAddress> a = base::ParseListenAddress(cfg.metrics_listen());
        !a.ok()) {
      v->Fail({{"metrics_listen", -1}}, absl::StrCat("is ", a.status().message()));
    }
  }
}

void CheckControlSocket(const config::TraceConfig& cfg, Validator* v) {
  if (!cfg.has_control_socket()) return;
  if (cfg.control_socket().empty() || cfg.control_socket()[0] != '/') {
    v->Fail({{"control_socket", -1}},
            absl::StrCat("is '", cfg.control_socket(), "': an absolute path"));
  } else if (cfg.control_socket().size() >= sizeof(sockaddr_un{}.sun_path)) {
    v->Fail({{"control_socket", -1}}, absl::StrCat("is ", cfg.control_socket().size(),
                                                   " bytes long: a unix socket path is "
                                                   "at most ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1));
  } else if (const std::string file = FirstNotADirectory(cfg.control_socket(), false);
             !file.empty()) {
    v->Fail({{"control_socket", -1}},
            absl::StrCat("is '", absl::CHexEscape(cfg.control_socket()), "', but ",
                         absl::CHexEscape(file),
                         " is not a directory: a path in a directory the agent can write"));
  }
}

// Settings of the stream: without it they would be ignored, which hides
// a forgotten `write_into_file: true`.
void CheckStreamingSettingsNeedStreaming(const config::TraceConfig& cfg, Validator* v) {
  if (cfg.write_into_file()) return;
  for (const auto& [name, value] :
       {std::pair<const char*, uint64_t>{"file_write_period_ms", cfg.file_write_period_ms()},
        {"max_file_size_bytes", cfg.max_file_size_bytes()},
        {"file_rotation_period_ms", cfg.file_rotation_period_ms()},
        {"max_files", cfg.max_files()},
        {"max_total_bytes", cfg.max_total_bytes()}}) {
    if (value != 0) {
      v->Fail({{name, -1}}, absl::StrCat("is ", value,
                                         " without write_into_file: true: it applies only "
                                         "to streaming; set write_into_file or remove it"));
    }
  }
}

void CheckGroups(const config::TraceConfig& cfg, Validator* v) {
  if (cfg.has_control_group() && cfg.control_group().empty()) {
    v->Fail({{"control_group", -1}}, "is empty: a group name or number, or leave it unset");
  }
  // Checked here, not when the first snapshot is written: a typo would
  // otherwise show only after the incident it was meant to record.
  if (cfg.has_output_group()) {
    if (cfg.output_group().empty()) {
      v->Fail({{"output_group", -1}}, "is empty: a group name or number, or leave it unset");
    } else if (!ResolveGroup("output_group", cfg.output_group()).ok()) {
      v->Fail({{"output_group", -1}},
              absl::StrCat("is '", absl::CHexEscape(cfg.output_group()),
                           "': no such group on this machine (see `getent group`); a group "
                           "name or number"));
    }
  }
}

// triggers[i].name: present, short, of plain characters, not the agent's
// own, and unlike the names of the triggers before it.
void CheckTriggerName(const config::TraceConfig::TriggerConfig& triggers, int i,
                      const FieldPath& at, Validator* v) {
  const std::string& name = triggers.triggers(i).name();
  const bool name_chars_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (name.empty()) {
    v->Fail(at, "is empty: a trigger needs the name its requests give");
  } else if (name.size() > kMaxTriggerNameBytes) {
    v->Fail(at, absl::StrCat("is ", name.size(), " bytes long: at most ", kMaxTriggerNameBytes));
  } else if (!name_chars_ok) {
    v->Fail(at, absl::StrCat("is '", absl::CHexEscape(name),
                             "': only letters, digits, '.', '_' and '-'"));
  } else if (absl::c_linear_search(kReservedTriggerNames, name) ||
             absl::StartsWith(name, kReservedTriggerNamePrefix)) {
    v->Fail(at, absl::StrCat("is '", name, "': reserved for the agent's own snapshots ('",
                             absl::StrJoin(kReservedTriggerNames, "', '"), "', and '",
                             kReservedTriggerNamePrefix, "...'); choose another name"));
  }
  for (int j = 0; j < i; j++) {
    if (triggers.triggers(j).name() == name && !name.empty()) {
      v->Fail(at, absl::StrCat("'", name, "' is also the name of triggers[", j,
                               "]: names must be unique"));
      break;
    }
  }
}

// How often and how late a trigger fires, and how often it is skipped.
void CheckTriggerLimits(const config::TraceConfig::TriggerConfig::Trigger& t, const FieldPath& at,
                        Validator* v) {
  for (const auto& [limit, value] :
       {std::pair<const char*, uint32_t>{"max_per_hour", t.max_per_hour()},
        {"max_per_24_h", t.max_per_24_h()}}) {
    if (value > kMaxTriggerFiresPerWindow) {
      v->Fail(Child(at, limit), absl::StrCat("is ", value, ": at most ", kMaxTriggerFiresPerWindow,
                                             " (0: no limit)"));
    }
  }
  if (t.stop_delay_ms() > kMaxTriggerStopDelayMs) {
    v->Fail(Child(at, "stop_delay_ms"),
            absl::StrCat("is ", t.stop_delay_ms(), ": at most ", kMaxTriggerStopDelayMs,
                         " (10 minutes); later, the buffers no longer hold the trigger's "
                         "moment"));
  }
  if (t.cooldown_ms() > kMaxTriggerCooldownMs) {
    v->Fail(Child(at, "cooldown_ms"),
            absl::StrCat("is ", t.cooldown_ms(), ": at most ", kMaxTriggerCooldownMs,
                         " (24 hours; 0: none); for fewer fires, set max_per_24_h"));
  }
  // Written so that NaN fails too.
  if (!(t.skip_probability() >= 0 && t.skip_probability() <= 1)) {
    v->Fail(Child(at, "skip_probability"),
            absl::StrCat("is ", t.skip_probability(), ": a probability, from 0 to 1"));
  }
}

// Which trigger_mode a program acts on is its own business (the agent
// snapshots); names, limits and probabilities are checked for every mode.
void CheckTriggers(const config::TraceConfig& cfg, Validator* v) {
  const config::TraceConfig::TriggerConfig& triggers = cfg.trigger_config();
  for (int i = 0; i < triggers.triggers_size(); i++) {
    const config::TraceConfig::TriggerConfig::Trigger& t = triggers.triggers(i);
    const FieldPath at = {{"trigger_config", -1}, {"triggers", i}};
    CheckTriggerName(triggers, i, Child(at, "name"), v);
    CheckTriggerLimits(t, at, v);
    internal::CheckTriggerKind(t, at, v);
  }
}

// Every check, in the order of the config's sections: the first problem
// found is the one reported.
void Validate(const config::TraceConfig& cfg, const MachineLimits& machine, Validator* v) {
  CheckBufferSizes(cfg, v);
  CheckStagingBudget(cfg, machine.memory_kb, v);
  CheckCompression(cfg, v);
  CheckMachineName(cfg, v);
  CheckBootInstance(cfg, v);
  CheckConsumerCpuPercent(cfg, v);
  CheckPathsHoldNoNul(cfg, v);
  CheckOutputDir(cfg, v);
  CheckMetricsTextfile(cfg, v);
  CheckMetricsPeriodAndListen(cfg, v);
  CheckControlSocket(cfg, v);
  CheckStreamingSettingsNeedStreaming(cfg, v);
  CheckGroups(cfg, v);
  CheckTriggers(cfg, v);
  for (int i = 0; i < cfg.data_sources_size(); i++) CheckDataSource(cfg, i, machine, v);
  CheckEveryBufferIsWritten(cfg, v);
}

void ValidateEffective(const config::TraceConfig& cfg, Validator* v) {
  if (!cfg.has_metrics_textfile() && !cfg.has_metrics_listen() && cfg.has_metrics_per_cpu()) {
    v->Fail({{"metrics_per_cpu", -1}},
            "is set without metrics_textfile or metrics_listen (nor --metrics-listen): it "
            "applies only to the metrics they give; set one or remove it");
  }
}

}  // namespace

absl::Status CheckConfig(const config::TraceConfig& cfg, const MachineLimits& machine,
                         const std::string& file_name,
                         const google::protobuf::TextFormat::ParseInfoTree* tree) {
  Validator v(file_name, tree);
  Validate(cfg, machine, &v);
  return v.status();
}

absl::Status CheckEffectiveConfig(const config::TraceConfig& cfg, const std::string& file_name) {
  Validator v(file_name, nullptr);
  ValidateEffective(cfg, &v);
  return v.status();
}

}  // namespace ringside::agent
