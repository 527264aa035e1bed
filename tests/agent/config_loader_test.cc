#include "agent/config_loader.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// BPF records scheduling, processes and incidents; ftrace adds what BPF
// does not cover, and takes over scheduling and processes without BPF.
TEST(ConfigLoaderTest, EmbeddedDefaultIsValidAndRecordsSchedAndProcessEvents) {
  const config::TraceConfig cfg = DefaultRecordConfig();
  ASSERT_EQ(cfg.buffers_size(), 1);
  EXPECT_EQ(cfg.buffers(0).size_kb(), 65536u);
  ASSERT_EQ(cfg.data_sources_size(), 2);
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
  EXPECT_EQ(unset->flush_period_ms(), kDefaultStreamingFlushPeriodMs);
  absl::StatusOr<config::TraceConfig> set = ParseConfig(
      "buffers { size_kb: 1024 }\nwrite_into_file: true\nflush_period_ms: 0\n", "s.pbtxt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->has_flush_period_ms());
  EXPECT_EQ(set->flush_period_ms(), 0u);
  absl::StatusOr<config::TraceConfig> whole_file =
      ParseConfig("buffers { size_kb: 1024 }\n", "w.pbtxt");
  ASSERT_TRUE(whole_file.ok()) << whole_file.status();
  EXPECT_FALSE(whole_file->has_flush_period_ms());
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

}  // namespace
}  // namespace ringside::agent
