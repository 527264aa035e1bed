// deploy/configs/: every example loads with the agent's own parser and
// validation, and the shipped default is the agent's embedded default.

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/tracefile/packet_compression.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {
namespace {

using Trigger = config::TraceConfig::TriggerConfig::Trigger;

std::string ConfigDir() { return SourceDir() + "/deploy/configs"; }

std::vector<std::string> ExampleConfigs() {
  std::vector<std::string> names;
  if (DIR* dir = opendir(ConfigDir().c_str())) {
    while (dirent* e = readdir(dir)) {
      if (absl::EndsWith(e->d_name, ".pbtxt")) names.emplace_back(e->d_name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// As `ringside agent -c FILE` loads it.
absl::StatusOr<config::TraceConfig> LoadAsTheAgentDoes(const std::string& name) {
  absl::StatusOr<config::TraceConfig> cfg = agent::LoadConfigFile(ConfigDir() + "/" + name);
  if (!cfg.ok()) return cfg;
  agent::ApplyAgentDefaults(&*cfg);
  if (absl::Status s = agent::ValidateConfig(*cfg, name); !s.ok()) return s;
  return cfg;
}

TEST(ExampleConfigsTest, TheDocumentedExamplesAreThere) {
  const std::vector<std::string> names = ExampleConfigs();
  for (const char* name :
       {"agent.pbtxt", "flight-recorder.pbtxt", "streaming.pbtxt", "one-cgroup.pbtxt"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(ExampleConfigsTest, EveryExampleLoadsAndWritesWhereTheUnitLetsIt) {
  for (const std::string& name : ExampleConfigs()) {
    SCOPED_TRACE(name);
    const absl::StatusOr<config::TraceConfig> cfg = LoadAsTheAgentDoes(name);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    // ProtectSystem=strict: only the StateDirectory is writable.
    EXPECT_TRUE(absl::StartsWith(cfg->output_dir(), "/var/lib/ringside/")) << cfg->output_dir();
    EXPECT_TRUE(absl::StartsWith(cfg->control_socket(), "/run/ringside/")) << cfg->control_socket();
  }
}

TEST(ExampleConfigsTest, ShippedDefaultIsTheAgentsEmbeddedDefault) {
  absl::StatusOr<config::TraceConfig> shipped = LoadAsTheAgentDoes("agent.pbtxt");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  config::TraceConfig embedded = agent::DefaultAgentConfig();
  // What the session applies to both before it runs them.
  agent::ApplyDefaults(&*shipped);
  agent::ApplyDefaults(&embedded);

  google::protobuf::util::MessageDifferencer diff;
  // The file spells out defaults (sched: true) the embedded one leaves unset.
  diff.set_message_field_comparison(google::protobuf::util::MessageDifferencer::EQUIVALENT);
  std::string report;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(embedded, *shipped)) << report;
  // EQUIVALENT takes `compression { zstd {} }` for no compression at all
  // (an empty message for an unset one): the codec is compared by itself.
  const agent::PacketCompression a = agent::PacketCompressionOf(embedded);
  const agent::PacketCompression b = agent::PacketCompressionOf(*shipped);
  EXPECT_EQ(agent::PacketCodecName(a.codec), std::string(agent::PacketCodecName(b.codec)));
  EXPECT_EQ(a.level, b.level);
  EXPECT_EQ(a.codec, agent::PacketCodec::kZstd) << "the agent's files compress by default";
}

TEST(ExampleConfigsTest, FlightRecorderSnapshotsOnOomAndCrashesOfItsService) {
  const absl::StatusOr<config::TraceConfig> cfg = LoadAsTheAgentDoes("flight-recorder.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->write_into_file());
  EXPECT_EQ(cfg->buffers(0).fill_policy(), config::TraceConfig::BufferConfig::RING_BUFFER);
  EXPECT_EQ(cfg->trigger_config().trigger_mode(),
            config::TraceConfig::TriggerConfig::CLONE_SNAPSHOT);
  bool oom = false, filtered_crash = false;
  for (const Trigger& t : cfg->trigger_config().triggers()) {
    for (int kind : t.incident().kinds()) {
      if (kind == Trigger::Incident::OOM_KILL) oom = true;
      if (kind == Trigger::Incident::FATAL_SIGNAL && t.incident().cgroups_size() > 0) {
        filtered_crash = true;
      }
    }
  }
  EXPECT_TRUE(oom);
  EXPECT_TRUE(filtered_crash);
}

TEST(ExampleConfigsTest, StreamingRotatesAndBoundsItsFiles) {
  const absl::StatusOr<config::TraceConfig> cfg = LoadAsTheAgentDoes("streaming.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->write_into_file());
  EXPECT_GT(cfg->file_write_period_ms(), 0u);
  EXPECT_GT(cfg->max_file_size_bytes(), 0u);
  EXPECT_GT(cfg->file_rotation_period_ms(), 0u);
  EXPECT_GT(cfg->max_files(), 0u);
  EXPECT_GT(cfg->max_total_bytes(), 0u);
}

TEST(ExampleConfigsTest, OneCgroupRecordsOnlyItsCgroupIntoBoundedFiles) {
  const absl::StatusOr<config::TraceConfig> cfg = LoadAsTheAgentDoes("one-cgroup.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  // Every source filters by cgroup: no ftrace source, whose events would be
  // the whole machine's.
  ASSERT_GT(cfg->data_sources_size(), 0);
  for (const auto& ds : cfg->data_sources()) {
    EXPECT_EQ(ds.config().name(), "linux.bpf");
    EXPECT_GT(ds.config().bpf_config().filter_cgroup_path_size() +
                  ds.config().bpf_config().filter_container_id_size(),
              0);
  }
  EXPECT_TRUE(cfg->write_into_file());
  EXPECT_GT(cfg->max_files(), 0u);
  EXPECT_GT(cfg->max_total_bytes(), 0u);
}

TEST(ExampleConfigsTest, ABrokenExampleWouldFail) {
  // The loading above is the agent's: a bad value in a copy is refused.
  TempDir tmp;
  const std::string path = tmp.path() + "/bad.pbtxt";
  WriteFile(path, absl::StrReplaceAll(ReadFile(ConfigDir() + "/streaming.pbtxt"),
                                      {{"name: \"linux.bpf\"", "name: \"linux.bfp\""}}));
  const absl::StatusOr<config::TraceConfig> cfg = agent::LoadConfigFile(path);
  EXPECT_FALSE(cfg.ok());
}

}  // namespace
}  // namespace ringside::deploy_testing
