#include "agent/config/config_loader.h"

#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// BPF records scheduling, processes and incidents; ftrace adds what BPF
// does not cover, and takes over scheduling and processes without BPF.
TEST(ConfigLoaderTest, EmbeddedDefaultIsValidAndRecordsSchedAndProcessEvents) {
  const config::TraceConfig cfg = DefaultRecordConfig();
  ASSERT_EQ(cfg.buffers_size(), 1);
  EXPECT_EQ(cfg.buffers(0).size_kb(), 65536u);
  ASSERT_EQ(cfg.data_sources_size(), 4);
  EXPECT_EQ(cfg.data_sources(2).config().name(), "linux.sys_stats");
  EXPECT_EQ(cfg.data_sources(3).config().name(), "linux.process_stats");
  const config::DataSourceConfig& bpf = cfg.data_sources(0).config();
  EXPECT_EQ(bpf.name(), "linux.bpf");
  EXPECT_TRUE(bpf.bpf_config().sched() && bpf.bpf_config().process() &&
              bpf.bpf_config().incidents());
  const auto& ftrace = cfg.data_sources(1).config().ftrace_config();
  std::vector<std::string> events(ftrace.ftrace_events().begin(), ftrace.ftrace_events().end());
  EXPECT_NE(std::find(events.begin(), events.end(), "power/cpu_frequency"), events.end());
  EXPECT_EQ(std::find(events.begin(), events.end(), "sched/sched_switch"), events.end());
  std::vector<std::string> fallback(ftrace.bpf_fallback_events().begin(),
                                    ftrace.bpf_fallback_events().end());
  EXPECT_NE(std::find(fallback.begin(), fallback.end(), "sched/sched_switch"), fallback.end());
  EXPECT_NE(std::find(fallback.begin(), fallback.end(), "sched/sched_process_exec"),
            fallback.end());
  EXPECT_EQ(cfg.duration_ms(), 10000u);
}

// Perfetto's importer warns (config_write_into_file_no_flush) about a
// streaming config without a flush period.
TEST(ConfigLoaderTest, StreamingConfigGetsAFlushPeriodUnlessItSetsOne) {
  absl::StatusOr<config::TraceConfig> unset =
      ParseConfig("buffers { size_kb: 1024 }\nwrite_into_file: true\n", "s.pbtxt");
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->flush_period_ms(), kDefaultFlushPeriodMs);
  absl::StatusOr<config::TraceConfig> set = ParseConfig(
      "buffers { size_kb: 1024 }\nwrite_into_file: true\nflush_period_ms: 0\n", "s.pbtxt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->has_flush_period_ms());
  EXPECT_EQ(set->flush_period_ms(), 0u);
  // Without streaming or the durable store, nothing needs a flush.
  absl::StatusOr<config::TraceConfig> whole_file =
      ParseConfig("buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 0\n", "w.pbtxt");
  ASSERT_TRUE(whole_file.ok()) << whole_file.status();
  EXPECT_FALSE(whole_file->has_flush_period_ms());
}

// A config that leaves the durable store out still gets one (a snapshot of a
// flight recorder that wrapped names every pid, issue 39), and with it the
// flushes its compaction waits for; an explicit 0 turns it off.
TEST(ConfigLoaderTest, AConfigWithoutADurableBufferGetsTheDefaultOneUnlessItSetsZero) {
  absl::StatusOr<config::TraceConfig> unset = ParseConfig("buffers { size_kb: 1024 }\n", "d.pbtxt");
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->durable_buffer_size_kb(), kDefaultDurableBufferSizeKb);
  EXPECT_EQ(unset->flush_period_ms(), kDefaultFlushPeriodMs);
  ApplyAgentDefaults(&*unset);
  EXPECT_EQ(unset->durable_buffer_size_kb(), kDefaultDurableBufferSizeKb);

  absl::StatusOr<config::TraceConfig> off =
      ParseConfig("buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 0\n", "d.pbtxt");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->has_durable_buffer_size_kb());
  EXPECT_EQ(off->durable_buffer_size_kb(), 0u);
  absl::StatusOr<config::TraceConfig> set =
      ParseConfig("buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 512\n", "d.pbtxt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->durable_buffer_size_kb(), 512u);
}

TEST(ConfigLoaderTest, SyntaxErrorsNameFileLineAndColumn) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig("buffers { size_kb: 1024 }\nduration_ms: 10\nbogus_field: 3\n", "my.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(cfg.status().message());
  EXPECT_NE(m.find("my.pbtxt: line 3, column 1"), std::string::npos) << m;
  EXPECT_NE(m.find("bogus_field"), std::string::npos) << m;

  cfg = ParseConfig("buffers { size_kb: -5 }", "x.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("line 1"), std::string::npos) << cfg.status();
}

TEST(ConfigLoaderTest, UnknownDataSourceListsTheKnownOnes) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.nope\" } }\n", "c.pbtxt");
  ASSERT_FALSE(cfg.ok());
  const std::string m(cfg.status().message());
  EXPECT_NE(m.find("'linux.nope' is not a data source"), std::string::npos) << m;
  EXPECT_NE(m.find("known: linux.bpf, linux.ftrace"), std::string::npos) << m;
}

TEST(ConfigLoaderTest, SemanticErrorsNameTheField) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig("duration_ms: 5\n", "c.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("no buffers"), std::string::npos);
  cfg = ParseConfig(
      "buffers { size_kb: 1024 }\n"
      "data_sources { config { name: \"linux.ftrace\" target_buffer: 1 "
      "ftrace_config { ftrace_events: \"sched/sched_switch\" } } }\n",
      "c.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("data_sources[0].config.target_buffer is 1"),
            std::string::npos)
      << cfg.status();
  cfg = ParseConfig("buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.ftrace\" } }",
                    "c.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("ftrace_events"), std::string::npos);
}

TEST(ConfigLoaderTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadConfigFile("/nonexistent/ringside.pbtxt").status().code(),
            absl::StatusCode::kNotFound);
}

// Values the kernel or the buffer cannot take are errors at parse time,
// naming the file, the line and the field.
TEST(ConfigLoaderTest, ValuesBeyondTheLimitsNameFileLineAndField) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::string many_tgids = [] {
    std::string t;
    for (int i = 1; i <= 17; i++) t += "filter_tgid: " + std::to_string(i) + " ";
    return t;
  }();
  const std::string tgids_config =
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\"\n bpf_config { " +
      many_tgids + "} } }\n";
  for (const Case& c : std::vector<Case>{
           {"buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\"\n"
            "  bpf_config { ring_size_kb: 100000000 } } }\n",
            "c.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.ring_size_kb is "
            "100000000: a BPF ring buffer holds at most 2097152 (2 GiB) per CPU"},
           {tgids_config.c_str(), "filter_tgid[16] is one of 17 filter_tgid values: at most 16"},
           {"buffers { size_kb: 1024 }\nbuffers {\n size_kb: 5000000 }\n",
            "c.pbtxt: line 3, column 2: buffers[1].size_kb is 5000000: it must be at least 4 and "
            "at most 4194300 (4 GiB less a page)"},
           {"buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.ftrace\" "
            "ftrace_config { ftrace_events: \"sched/sched_switch\" buffer_size_kb: 3000000 } } }",
            "ftrace_config.buffer_size_kb is 3000000: at most 2097152 (2 GiB) per CPU"},
           {"buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" "
            "bpf_config { filter_max_prio: 200 } } }",
            "bpf_config.filter_max_prio is 200: kernel priorities are 0 to 139"},
       }) {
    absl::StatusOr<config::TraceConfig> cfg = ParseConfig(c.text, "c.pbtxt");
    ASSERT_FALSE(cfg.ok()) << c.says;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(cfg.status().message().find(c.says), std::string::npos) << cfg.status();
  }
}

// Together the per-CPU kernel buffers may take at most half the machine.
TEST(ConfigLoaderTest, PerCpuBuffersBeyondHalfTheMachinesMemoryAreErrors) {
  const std::string text =
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" "
      "bpf_config { ring_size_kb: 1048576 } } }";
  // 64 CPUs of 1 GiB on a machine of 16 GiB: no; on one of 256 GiB: yes.
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(text, "c.pbtxt", {64, 16u << 20});
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("64 CPUs of 1 GiB exceed half of this machine's 16 GiB"),
            std::string::npos)
      << cfg.status();
  EXPECT_TRUE(ParseConfig(text, "c.pbtxt", {64, 256u << 20}).ok());
}

TEST(ConfigLoaderTest, AFileThatCannotBeReadSaysWhy) {
  absl::StatusOr<config::TraceConfig> cfg = LoadConfigFile("/nonexistent/ringside.pbtxt");
  EXPECT_NE(cfg.status().message().find("No such file or directory"), std::string::npos)
      << cfg.status();
  cfg = LoadConfigFile("/tmp");
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cfg.status().message().find("it is a directory"), std::string::npos) << cfg.status();
}

TEST(ConfigLoaderTest, AgentPathsMustBeAbsoluteAndTheSocketFitAUnixAddress) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig("buffers { size_kb: 1024 }\noutput_dir: \"snaps\"\n", "a.pbtxt");
  EXPECT_EQ(cfg.status().message(),
            "a.pbtxt: line 2, column 1: output_dir is 'snaps': an absolute path");
  cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ncontrol_socket: \"/" + std::string(120, 'x') + "\"\n", "a.pbtxt");
  EXPECT_NE(cfg.status().message().find("control_socket is 121 bytes long: a unix socket path "
                                        "is at most 107"),
            std::string::npos)
      << cfg.status();
  cfg = ParseConfig("buffers { size_kb: 1024 }\ncontrol_group: \"\"\n", "a.pbtxt");
  EXPECT_NE(cfg.status().message().find("control_group is empty"), std::string::npos)
      << cfg.status();
  cfg = ParseConfig(
      "buffers { size_kb: 1024 }\noutput_dir: \"/var/tmp/s\"\ncontrol_socket: "
      "\"/run/r.sock\"\ncontrol_group: \"adm\"\n",
      "a.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->output_dir(), "/var/tmp/s");
}

TEST(ConfigLoaderTest, OutputGroupMustBeAGroupOfThisMachine) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig("buffers { size_kb: 1024 }\noutput_group: \"rs-no-such-group\"\n", "a.pbtxt");
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cfg.status().message(),
            "a.pbtxt: line 2, column 1: output_group is 'rs-no-such-group': no such group on this "
            "machine (see `getent group`); a group name or number");
  cfg = ParseConfig("buffers { size_kb: 1024 }\noutput_group: \"\"\n", "a.pbtxt");
  EXPECT_NE(cfg.status().message().find("output_group is empty"), std::string::npos)
      << cfg.status();
  cfg = ParseConfig("buffers { size_kb: 1024 }\noutput_group: \"adm\"\n", "a.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->output_group(), "adm");
  // A number is taken as is, as chown(1) takes it.
  cfg = ParseConfig("buffers { size_kb: 1024 }\noutput_group: \"4242\"\n", "a.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(*ResolveGroup("output_group", "adm"), 4u);
}

TEST(ConfigLoaderTest, TheAgentsDefaultRecordsUntilStoppedWithTheAgentSettingsFilledIn) {
  const config::TraceConfig cfg = DefaultAgentConfig();
  EXPECT_EQ(cfg.duration_ms(), 0u);
  EXPECT_EQ(cfg.buffers(0).size_kb(), 65536u);
  EXPECT_EQ(cfg.buffers(0).fill_policy(), config::TraceConfig::BufferConfig::RING_BUFFER);
  EXPECT_FALSE(cfg.write_into_file());
  EXPECT_GT(cfg.durable_buffer_size_kb(), 0u);
  EXPECT_EQ(cfg.output_dir(), "/var/lib/ringside/snapshots");
  EXPECT_EQ(cfg.control_socket(), "/run/ringside/control.sock");
  ASSERT_GE(cfg.data_sources_size(), 1);
  EXPECT_EQ(cfg.data_sources(0).config().name(), "linux.bpf");
  EXPECT_TRUE(cfg.data_sources(0).config().bpf_config().incidents());
  // OOM kills and crashes take snapshots by themselves, a bounded number.
  const config::TraceConfig::TriggerConfig& tc = cfg.trigger_config();
  EXPECT_EQ(tc.trigger_mode(), config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT);
  ASSERT_EQ(tc.triggers_size(), 2);
  EXPECT_EQ(tc.triggers(0).name(), "oom_kill");
  EXPECT_EQ(tc.triggers(0).incident().kinds(0),
            config::TraceConfig::TriggerConfig::Trigger::Incident::OOM_KILL);
  EXPECT_EQ(tc.triggers(1).name(), "crash");
  EXPECT_EQ(tc.triggers(1).incident().kinds(0),
            config::TraceConfig::TriggerConfig::Trigger::Incident::FATAL_SIGNAL);
  for (const auto& t : tc.triggers()) EXPECT_GT(t.max_per_24_h(), 0u) << t.name();
  EXPECT_GT(cfg.max_snapshot_files(), 0u);
  // Its files are copied off the node: compressed (Perfetto's zstd packets).
  EXPECT_TRUE(cfg.compression().has_zstd());
  EXPECT_FALSE(DefaultRecordConfig().has_compression()) << "record compresses with -z only";
  EXPECT_TRUE(ValidateConfig(cfg, "<embedded agent default>").ok());
}

// A config file that leaves retention and the request limits out gets the
// embedded default's, so a flood of requests can neither fill the disk nor
// make a snapshot per request; an explicit 0 still means no limit.
TEST(ConfigLoaderTest, AnAgentConfigWithoutRetentionOrRequestLimitsGetsTheDefaults) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig("buffers { size_kb: 1024 }\n", "a.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ApplyAgentDefaults(&*cfg);
  EXPECT_EQ(cfg->max_snapshot_files(), kDefaultMaxSnapshotFiles);
  EXPECT_EQ(cfg->max_snapshot_bytes(), 0u);
  EXPECT_EQ(cfg->snapshot_request_cooldown_ms(), kDefaultSnapshotRequestCooldownMs);
  EXPECT_EQ(cfg->max_snapshot_requests_per_hour(), kDefaultMaxSnapshotRequestsPerHour);
  EXPECT_EQ(DefaultAgentConfig().max_snapshot_files(), kDefaultMaxSnapshotFiles);

  // Bytes alone bound it: no count is added. Zeros stay zeros.
  cfg = ParseConfig(
      "buffers { size_kb: 1024 }\nmax_snapshot_bytes: 1000000\n"
      "snapshot_request_cooldown_ms: 0\nmax_snapshot_requests_per_hour: 0\n",
      "a.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ApplyAgentDefaults(&*cfg);
  EXPECT_EQ(cfg->max_snapshot_files(), 0u);
  EXPECT_EQ(cfg->max_snapshot_bytes(), 1000000u);
  EXPECT_EQ(cfg->snapshot_request_cooldown_ms(), 0u);
  EXPECT_EQ(cfg->max_snapshot_requests_per_hour(), 0u);
  cfg = ParseConfig("buffers { size_kb: 1024 }\nmax_snapshot_files: 0\n", "a.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ApplyAgentDefaults(&*cfg);
  EXPECT_EQ(cfg->max_snapshot_files(), 0u);
}

// Perfetto's trigger_config reads as it does in Perfetto; the ringside
// extensions sit beside it and the cooldown default is written into the
// effective config.
TEST(ConfigLoaderTest, TriggerConfigReadsPerfettosFieldsAndOurExtensions) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\n"
      "trigger_config {\n"
      "  trigger_mode: CLONE_SNAPSHOT\n"
      "  trigger_timeout_ms: 3600000\n"
      "  triggers { name: \"oom\" stop_delay_ms: 2000 max_per_24_h: 20 skip_probability: 0.5\n"
      "             cooldown_ms: 300000 max_per_hour: 4 }\n"
      "  triggers { name: \"crash.app-1_x\" }\n"
      "  triggers { name: \"manual\" cooldown_ms: 0 }\n"
      "}\n"
      "max_snapshot_files: 50\nmax_snapshot_bytes: 10737418240\n",
      "t.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const config::TraceConfig::TriggerConfig& tc = cfg->trigger_config();
  EXPECT_EQ(tc.trigger_mode(), config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT);
  EXPECT_EQ(tc.trigger_timeout_ms(), 3600000u);
  ASSERT_EQ(tc.triggers_size(), 3);
  EXPECT_EQ(tc.triggers(0).name(), "oom");
  EXPECT_EQ(tc.triggers(0).stop_delay_ms(), 2000u);
  EXPECT_EQ(tc.triggers(0).max_per_24_h(), 20u);
  EXPECT_EQ(tc.triggers(0).skip_probability(), 0.5);
  EXPECT_EQ(tc.triggers(0).cooldown_ms(), 300000u);
  EXPECT_EQ(tc.triggers(0).max_per_hour(), 4u);
  EXPECT_EQ(tc.triggers(1).cooldown_ms(), kDefaultTriggerCooldownMs);
  EXPECT_TRUE(tc.triggers(2).has_cooldown_ms());
  EXPECT_EQ(tc.triggers(2).cooldown_ms(), 0u);
  EXPECT_EQ(cfg->max_snapshot_files(), 50u);
  EXPECT_EQ(cfg->max_snapshot_bytes(), uint64_t{10} << 30);
}

TEST(ConfigLoaderTest, AConfigWithoutTriggersGetsNoTriggerConfig) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig("buffers { size_kb: 1024 }\n", "t.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->has_trigger_config());
}

// Which mode a program acts on is its own check; the loader reads any.
TEST(ConfigLoaderTest, EveryTriggerModeIsAccepted) {
  for (const char* mode : {"UNSPECIFIED", "START_TRACING", "STOP_TRACING", "CLONE_SNAPSHOT"}) {
    absl::StatusOr<config::TraceConfig> cfg =
        ParseConfig(std::string("buffers { size_kb: 1024 }\ntrigger_config { trigger_mode: ") +
                        mode + " triggers { name: \"a\" } }\n",
                    "t.pbtxt");
    EXPECT_TRUE(cfg.ok()) << mode << ": " << cfg.status();
  }
}

TEST(ConfigLoaderTest, BadTriggerNamesNameFileLineAndField) {
  struct Case {
    std::string triggers;
    std::string says;
  };
  const std::string long_name(65, 'a');
  for (const Case& c : std::vector<Case>{
           {"triggers { name: \"ok\" }\n  triggers {\n name: \"\" }",
            "t.pbtxt: line 4, column 2: trigger_config.triggers[1].name is empty: a trigger "
            "needs the name its requests give"},
           {"triggers { name: \"" + long_name + "\" }",
            "t.pbtxt: line 2, column 29: trigger_config.triggers[0].name is 65 bytes long: at "
            "most 64"},
           {"triggers { name: \"oom kill\" }",
            "t.pbtxt: line 2, column 29: trigger_config.triggers[0].name is 'oom kill': only "
            "letters, digits, '.', '_' and '-'"},
           {"triggers { name: \"a/../b\\n\" }",
            "trigger_config.triggers[0].name is 'a/../b\\n': only letters, digits"},
           {"triggers { name: \"request\" }",
            "t.pbtxt: line 2, column 29: trigger_config.triggers[0].name is 'request': reserved "
            "for the agent's own snapshots ('request', 'signal', 'other', and 'request-...')"},
           {"triggers { name: \"other\" }", "triggers[0].name is 'other': reserved"},
           {"triggers { name: \"signal\" }", "triggers[0].name is 'signal': reserved"},
           {"triggers { name: \"request-deploy\" }",
            "triggers[0].name is 'request-deploy': reserved"},
           {"triggers { name: \"oom\" }\n triggers { name: \"x\" }\n triggers { name: \"oom\" }",
            "t.pbtxt: line 4, column 13: trigger_config.triggers[2].name 'oom' is also the name "
            "of triggers[0]: names must be unique"},
       }) {
    absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
        "buffers { size_kb: 1024 }\ntrigger_config { " + c.triggers + " }\n", "t.pbtxt");
    ASSERT_FALSE(cfg.ok()) << c.says;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(cfg.status().message().find(c.says), std::string::npos) << cfg.status();
  }
  // 64 bytes is allowed.
  EXPECT_TRUE(ParseConfig("buffers { size_kb: 1024 }\ntrigger_config { triggers { name: \"" +
                              std::string(64, 'a') + "\" } }\n",
                          "t.pbtxt")
                  .ok());
}

TEST(ConfigLoaderTest, SkipProbabilityOutsideZeroToOneIsAnError) {
  for (const char* p : {"-0.1", "1.5", "nan", "inf"}) {
    absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
        std::string("buffers { size_kb: 1024 }\ntrigger_config {\n triggers { name: \"a\" "
                    "skip_probability: ") +
            p + " } }\n",
        "t.pbtxt");
    ASSERT_FALSE(cfg.ok()) << p;
    EXPECT_NE(cfg.status().message().find("t.pbtxt: line 3, column 23: "
                                          "trigger_config.triggers[0].skip_probability is "),
              std::string::npos)
        << cfg.status();
    EXPECT_NE(cfg.status().message().find(": a probability, from 0 to 1"), std::string::npos)
        << cfg.status();
  }
  for (const char* p : {"0", "1", "0.999"}) {
    EXPECT_TRUE(ParseConfig(std::string("buffers { size_kb: 1024 }\ntrigger_config { triggers { "
                                        "name: \"a\" skip_probability: ") +
                                p + " } }\n",
                            "t.pbtxt")
                    .ok())
        << p;
  }
}

TEST(ConfigLoaderTest, AnIncidentFilterReadsKindsSignalsAndComms) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\n"
      "trigger_config { triggers { name: \"crash\" incident {\n"
      "  kinds: FATAL_SIGNAL kinds: CORE_DUMP signals: 11 signals: 6 comms: \"java\" } } }\n",
      "t.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const auto& incident = cfg->trigger_config().triggers(0).incident();
  ASSERT_EQ(incident.kinds_size(), 2);
  EXPECT_EQ(incident.kinds(1), config::TraceConfig::TriggerConfig::Trigger::Incident::CORE_DUMP);
  EXPECT_EQ(incident.signals(0), 11);
  EXPECT_EQ(incident.comms(0), "java");
}

// The effective config states the signals a crash filter uses when it
// names none; other kinds get no signals.
TEST(ConfigLoaderTest, AFatalSignalFilterWithoutSignalsGetsTheCrashSignals) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\n"
      "trigger_config { triggers { name: \"crash\" incident { kinds: FATAL_SIGNAL } }\n"
      "                 triggers { name: \"oom\" incident { kinds: OOM_KILL } } }\n",
      "t.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const auto& crash = cfg->trigger_config().triggers(0).incident();
  EXPECT_EQ(std::vector<int32_t>(crash.signals().begin(), crash.signals().end()),
            (std::vector<int32_t>{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}));
  EXPECT_EQ(cfg->trigger_config().triggers(1).incident().signals_size(), 0);
}

TEST(ConfigLoaderTest, BadIncidentFiltersNameFileLineAndField) {
  struct Case {
    std::string incident;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"incident { }",
            "trigger_config.triggers[0].incident.kinds is empty: OOM_KILL, FATAL_SIGNAL or "
            "CORE_DUMP, at least one"},
           {"incident { kinds: KIND_UNSPECIFIED }",
            "trigger_config.triggers[0].incident.kinds[0] is KIND_UNSPECIFIED"},
           {"incident {\n kinds: FATAL_SIGNAL signals: 11 signals: 15 }",
            "t.pbtxt: line 3, column 34: trigger_config.triggers[0].incident.signals[1] is 15: "
            "linux.bpf reports the fatal signals 4, 6, 7, 8, 9, 11"},
           {"incident { kinds: OOM_KILL comms: \"a-name-of-16-chr\" }",
            "trigger_config.triggers[0].incident.comms[0] is 'a-name-of-16-chr': a task name is "
            "1 to 15 bytes"},
           {"incident { kinds: OOM_KILL cgroups: \"system.slice\" }",
            "trigger_config.triggers[0].incident.cgroups[0] is 'system.slice': a cgroup's path "
            "below the cgroup2 mount, starting with '/'"},
           {"incident { kinds: OOM_KILL cgroups: \"/a\" cgroups: \"/a/../../etc\" }",
            "trigger_config.triggers[0].incident.cgroups[1] is '/a/../../etc'"},
       }) {
    absl::StatusOr<config::TraceConfig> cfg =
        ParseConfig("buffers { size_kb: 1024 }\ntrigger_config { triggers { name: \"a\" " +
                        c.incident + " } }\n",
                    "t.pbtxt");
    ASSERT_FALSE(cfg.ok()) << c.says;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(cfg.status().message().find(c.says), std::string::npos) << cfg.status();
  }
}

TEST(ConfigLoaderTest, TriggerLimitsAboveTheBoundAreErrors) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ntrigger_config { triggers { name: \"a\" max_per_hour: 10001 } "
      "}",
      "t.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find(
                "trigger_config.triggers[0].max_per_hour is 10001: at most 10000 (0: no limit)"),
            std::string::npos)
      << cfg.status();
  cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ntrigger_config { triggers { name: \"a\" max_per_24_h: 20000 } "
      "}",
      "t.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("trigger_config.triggers[0].max_per_24_h is 20000"),
            std::string::npos)
      << cfg.status();
  EXPECT_TRUE(ParseConfig("buffers { size_kb: 1024 }\ntrigger_config { triggers { name: \"a\" "
                          "max_per_hour: 10000 max_per_24_h: 10000 } }",
                          "t.pbtxt")
                  .ok());
}

}  // namespace
}  // namespace ringside::agent

namespace ringside::agent {
namespace {

// linux.bpf's container and cgroup filters: values that could never match
// are errors naming the file, the line and the field.
TEST(ConfigLoaderTest, CgroupFiltersTakeContainerIdsAndAbsolutePaths) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" bpf_config {\n"
      "  filter_container_id: \"3f4b1c2d5e6f\"\n"
      "  filter_container_id: "
      "\"3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809\"\n"
      "  filter_cgroup_path: \"/system.slice/nginx.service\" } } }\n",
      "c.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const config::BpfConfig& b = cfg->data_sources(0).config().bpf_config();
  EXPECT_EQ(b.filter_container_id_size(), 2);
  EXPECT_EQ(b.filter_cgroup_path(0), "/system.slice/nginx.service");
}

TEST(ConfigLoaderTest, BadCgroupFiltersNameFileLineAndField) {
  struct Case {
    std::string value;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"filter_container_id: \"3f4b1c2d5e6\"",
            "c.pbtxt: line 4, column 3: data_sources[0].config.bpf_config.filter_container_id[1] "
            "is '3f4b1c2d5e6': a container id is 12 to 64 lowercase hex digits"},
           {"filter_container_id: \"3F4B1C2D5E6F\"", "filter_container_id[1] is '3F4B1C2D5E6F'"},
           {"filter_container_id: \"" + std::string(65, 'a') + "\"",
            "filter_container_id[1] is 'aaaa"},
           {"filter_container_id: \"docker-3f4b1c2d5e6f\"",
            "filter_container_id[1] is 'docker-3f4b1c2d5e6f'"},
           {"filter_cgroup_path: \"system.slice\"",
            "line 4, column 3: data_sources[0].config.bpf_config.filter_cgroup_path[0] is "
            "'system.slice': a cgroup's path below the cgroup2 mount, starting with '/'"},
           {"filter_cgroup_path: \"/a/../b\"", "filter_cgroup_path[0] is '/a/../b'"},
           {"filter_cgroup_path: \"\"", "filter_cgroup_path[0] is ''"},
       }) {
    const std::string text =
        "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" bpf_config {\n"
        "  filter_container_id: \"0123456789ab\"\n  " +
        c.value + " } } }\n";
    absl::StatusOr<config::TraceConfig> cfg = ParseConfig(text, "c.pbtxt");
    ASSERT_FALSE(cfg.ok()) << c.says;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(cfg.status().message().find(c.says), std::string::npos) << cfg.status();
  }
}

TEST(ConfigLoaderTest, AtMost256CgroupFilterValues) {
  std::string values;
  for (int i = 0; i < 257; i++) values += absl::StrCat("filter_cgroup_path: \"/c", i, "\"\n");
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" bpf_config {\n" +
          values + "} } }\n",
      "c.pbtxt");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("257 values: at most 256 together"), std::string::npos)
      << cfg.status();
}

}  // namespace
}  // namespace ringside::agent
