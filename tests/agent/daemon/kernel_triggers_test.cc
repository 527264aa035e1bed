#include "agent/daemon/kernel_triggers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

config::TraceConfig WithStalls(uint32_t blocked_ms, uint32_t runqueue_ms) {
  config::TraceConfig config;
  auto* tc = config.mutable_trigger_config();
  if (blocked_ms != 0) {
    auto* t = tc->add_triggers();
    t->set_name("stuck");
    t->mutable_blocked()->set_threshold_ms(blocked_ms);
  }
  if (runqueue_ms != 0) {
    auto* t = tc->add_triggers();
    t->set_name("starved");
    t->mutable_runqueue_delay()->set_threshold_ms(runqueue_ms);
  }
  return config;
}

// What the log fd holds.
std::string Logged(int fd) {
  std::string out(4096, '\0');
  const ssize_t n = pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// linux.bpf takes the stall thresholds at start: a reload may raise a
// `runqueue_delay` threshold, and one below it (or one where there was
// none), or any change of the `blocked` ones, is logged as taking a
// restart.
TEST(KernelTriggersTest, AReloadOfStallThresholdsLinuxBpfCannotFollowSaysItTakesARestart) {
  const int fd = memfd_create("log", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  AgentLog log(fd);
  KernelTriggers triggers;
  triggers.Start(WithStalls(1000, 50), nullptr, nullptr, log);
  triggers.CheckReload(WithStalls(1000, 80), log);
  EXPECT_THAT(Logged(fd), Not(HasSubstr("threshold")));
  triggers.CheckReload(WithStalls(1500, 50), log);
  EXPECT_THAT(Logged(fd), HasSubstr("the `blocked` thresholds changed"));
  triggers.CheckReload(WithStalls(1000, 20), log);
  EXPECT_THAT(Logged(fd), HasSubstr("a `runqueue_delay` threshold of 20 ms is below 50 ms"));
  triggers.Stop();
  close(fd);
}

}  // namespace
}  // namespace ringside::agent
