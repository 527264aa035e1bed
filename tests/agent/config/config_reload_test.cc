#include "agent/config/config_reload.h"

#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

config::TraceConfig Parse(const std::string& text) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(text, "r.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  ApplyAgentDefaults(&*cfg);
  return *cfg;
}

TEST(ConfigReloadTest, TheSameConfigChangesNothing) {
  const config::TraceConfig c = Parse("buffers { size_kb: 1024 }\n");
  const ReloadPlan plan = PlanReload(c, c);
  EXPECT_TRUE(plan.applied.empty());
  EXPECT_TRUE(plan.kept.empty());
}

TEST(ConfigReloadTest, OutputDirChangesLiveAndTheRestKeepsItsRunningValue) {
  const config::TraceConfig running = Parse(
      "buffers { size_kb: 1024 }\noutput_dir: \"/a\"\n"
      "data_sources { config { name: \"linux.bpf\" } }\n");
  const config::TraceConfig loaded = Parse(
      "buffers { size_kb: 2048 }\noutput_dir: \"/b\"\ncontrol_socket: \"/run/x.sock\"\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config { sched: false } } }\n");
  const ReloadPlan plan = PlanReload(running, loaded);
  EXPECT_EQ(plan.applied, std::vector<std::string>({"output_dir"}));
  EXPECT_EQ(plan.kept, std::vector<std::string>({"buffers", "data_sources", "control_socket"}));
  EXPECT_EQ(plan.next.output_dir(), "/b");
  EXPECT_EQ(plan.next.buffers(0).size_kb(), 1024u);
  EXPECT_TRUE(plan.next.data_sources(0).config().bpf_config().sched());
  EXPECT_EQ(plan.next.control_socket(), running.control_socket());
}

}  // namespace
}  // namespace ringside::agent
