#include "agent/daemon/config_reloader.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "base/scoped_fd.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;
using testing::WriteTextFile;

// Records what a reload hands over.
class FakeTarget : public ConfigReloader::Target {
 public:
  void SetSnapshotDir(const std::string& dir) override { calls.push_back("output_dir " + dir); }
  void ReplaceTriggers(const config::TraceConfig& config) override {
    calls.push_back(absl::StrCat("triggers ", config.trigger_config().triggers_size()));
  }
  void ReplaceRequestLimits(const config::TraceConfig& config) override {
    calls.push_back(absl::StrCat("request limits ", config.snapshot_request_cooldown_ms()));
  }
  void SetRetention(uint32_t max_files, uint64_t max_bytes) override {
    calls.push_back(absl::StrCat("retention ", max_files, " ", max_bytes));
  }

  std::vector<std::string> calls;
};

// A config file in a scratch directory, the reloader over it as the agent
// starts one (the file's effective config running), and its log.
class ConfigReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_path_ = dir_.Join("agent.pbtxt");
    log_path_ = dir_.Join("agent.log");
    log_fd_.reset(open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(log_fd_);
    log_ = std::make_unique<AgentLog>(log_fd_.get());
  }

  // The reloader, running the file as it is now.
  void Start() {
    absl::StatusOr<config::TraceConfig> running = LoadConfigFile(config_path_);
    ASSERT_TRUE(running.ok()) << running.status();
    ApplyAgentDefaults(&*running);
    ConfigReloader::Options options;
    options.config_path = config_path_;
    options.log = log_.get();
    options.target = &target_;
    reloader_ = std::make_unique<ConfigReloader>(std::move(options), *running);
  }

  // "output_dir: <dir>/<snapshots>" and `more`.
  std::string ConfigText(const std::string& snapshots, const std::string& more) const {
    return absl::StrCat("output_dir: \"", dir_.Join(snapshots), "\"\n", more);
  }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  ScratchDir dir_;
  std::string config_path_;
  std::string log_path_;
  base::ScopedFd log_fd_;
  std::unique_ptr<AgentLog> log_;
  FakeTarget target_;
  std::unique_ptr<ConfigReloader> reloader_;
};

TEST_F(ConfigReloaderTest, AReloadAppliesLiveFieldsAndNamesWhatNeedsARestart) {
  ASSERT_TRUE(WriteTextFile(config_path_,
                            ConfigText("a", "buffers { size_kb: 1024 }\nmax_snapshot_files: 5\n")));
  Start();
  ASSERT_TRUE(WriteTextFile(config_path_,
                            ConfigText("b", "buffers { size_kb: 2048 }\nmax_snapshot_files: 7\n")));

  reloader_->Reload();

  // The new output_dir is made ready before the target is told of it.
  EXPECT_EQ(access(dir_.Join("b").c_str(), F_OK), 0);
  ASSERT_EQ(target_.calls.size(), 2u) << ::testing::PrintToString(target_.calls);
  EXPECT_EQ(target_.calls[0], "output_dir " + dir_.Join("b"));
  EXPECT_TRUE(absl::StartsWith(target_.calls[1], "retention 7 ")) << target_.calls[1];
  EXPECT_EQ(reloader_->output_dir(), dir_.Join("b"));
  const control::ReloadStatus status = reloader_->status();
  EXPECT_EQ(status.count(), 1u);
  EXPECT_EQ(status.refused(), 0u);
  EXPECT_EQ(status.last_error(), "");
  ASSERT_EQ(status.waiting_for_restart_size(), 1);
  EXPECT_EQ(status.waiting_for_restart(0), "buffers");
  const std::string log = Log();
  EXPECT_TRUE(absl::StrContains(log, "buffers changed, which needs a restart")) << log;
  EXPECT_TRUE(absl::StrContains(log, "applied: output_dir, max_snapshot_files")) << log;
}

TEST_F(ConfigReloaderTest, ABrokenConfigIsRefusedAndTheRunningOneKept) {
  ASSERT_TRUE(WriteTextFile(config_path_, ConfigText("a", "buffers { size_kb: 1024 }\n")));
  Start();
  ASSERT_TRUE(WriteTextFile(config_path_, ConfigText("b", "bogus_field: 1\n")));

  reloader_->Reload();

  EXPECT_TRUE(target_.calls.empty()) << ::testing::PrintToString(target_.calls);
  EXPECT_EQ(reloader_->output_dir(), dir_.Join("a"));
  EXPECT_NE(access(dir_.Join("b").c_str(), F_OK), 0);
  const control::ReloadStatus status = reloader_->status();
  EXPECT_EQ(status.count(), 1u);
  EXPECT_EQ(status.refused(), 1u);
  EXPECT_TRUE(absl::StrContains(status.last_error(), "bogus_field")) << status.last_error();
  EXPECT_TRUE(absl::StrContains(status.last_error(), config_path_)) << status.last_error();
  EXPECT_TRUE(absl::StrContains(Log(), "keeping the running config")) << Log();
}

TEST_F(ConfigReloaderTest, AGoodReloadAfterARefusedOneClearsItsError) {
  ASSERT_TRUE(WriteTextFile(config_path_, ConfigText("a", "buffers { size_kb: 1024 }\n")));
  Start();
  ASSERT_TRUE(WriteTextFile(config_path_, ConfigText("a", "bogus_field: 1\n")));
  reloader_->Reload();
  ASSERT_TRUE(
      WriteTextFile(config_path_, ConfigText("a",
                                             "buffers { size_kb: 1024 }\n"
                                             "trigger_config { triggers { name: \"slow\" } }\n")));

  reloader_->Reload();

  EXPECT_EQ(target_.calls, std::vector<std::string>({"triggers 1"}));
  EXPECT_EQ(reloader_->trigger_names(), (std::map<std::string, std::string>{{"slow", ""}}));
  const control::ReloadStatus status = reloader_->status();
  EXPECT_EQ(status.count(), 2u);
  EXPECT_EQ(status.refused(), 1u);
  EXPECT_EQ(status.last_error(), "");
}

TEST_F(ConfigReloaderTest, TheEmbeddedDefaultHasNothingToReload) {
  ConfigReloader::Options options;
  options.log = log_.get();
  options.target = &target_;
  reloader_ = std::make_unique<ConfigReloader>(std::move(options), DefaultAgentConfig());

  reloader_->Reload();

  EXPECT_TRUE(target_.calls.empty());
  EXPECT_EQ(reloader_->status().count(), 1u);
  EXPECT_EQ(reloader_->status().refused(), 0u);
  EXPECT_TRUE(absl::StrContains(Log(), "nothing to reload")) << Log();
}

}  // namespace
}  // namespace ringside::agent
