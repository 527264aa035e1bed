// The prev_state mapping of bpf/task_state.h, per range of kernels, and the
// choice of rules from the kernel release. The program's values against the
// kernel's own tracepoint: event_source_test.cc.

#include "bpf/task_state.h"

#include "bpf/task_state_rules.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

// Raw state bits of 5.18+ kernels (include/linux/sched.h), beyond those
// task_state.h needs.
constexpr uint32_t kStopped = 0x4, kTraced = 0x8, kExitDead = 0x10, kExitZombie = 0x20,
                   kParked = 0x40, kDead = 0x80, kWakeKill = 0x100, kFreezable = 0x2000;
constexpr uint32_t kKillable = kWakeKill | RS_TASK_UNINTERRUPTIBLE;

// What Perfetto decodes the reported bit as.
constexpr int64_t kR = 0, kS = 0x1, kD = 0x2, kT = 0x4, kt = 0x8, kX = 0x10, kZ = 0x20, kP = 0x40,
                  kI = 0x80, kRPreempted = 0x100;

constexpr uint32_t kOld = 0;                                  // 5.18 to 6.5, 6.1 before 6.1.123.
constexpr uint32_t kMasked = RS_TASK_STATE_RULE_MASKED_IDLE;  // 6.6 to 6.12.7 (but 6.6.69+).
constexpr uint32_t kNewest = RS_TASK_STATE_RULES_NEWEST;      // 6.13+, and the backports.

int64_t Reported(uint32_t state, uint32_t rules, uint32_t exit_state = 0, bool preempt = false) {
  return rs_sched_switch_state(preempt, state, exit_state, rules);
}

TEST(TaskStateTest, PreemptionIsReportMaxWhateverTheState) {
  for (uint32_t rules : {kOld, kMasked, kNewest}) {
    EXPECT_EQ(Reported(0, rules, 0, true), kRPreempted);
    EXPECT_EQ(Reported(RS_TASK_INTERRUPTIBLE, rules, 0, true), kRPreempted);
  }
}

TEST(TaskStateTest, PlainStatesAreTheirOwnBitOnEveryKernel) {
  for (uint32_t rules : {kOld, kMasked, kNewest}) {
    EXPECT_EQ(Reported(0, rules), kR);
    EXPECT_EQ(Reported(RS_TASK_INTERRUPTIBLE, rules), kS);
    EXPECT_EQ(Reported(RS_TASK_UNINTERRUPTIBLE, rules), kD);
    EXPECT_EQ(Reported(kStopped, rules), kT);
    EXPECT_EQ(Reported(kTraced, rules), kt);
    EXPECT_EQ(Reported(kParked, rules), kP);
    EXPECT_EQ(Reported(RS_TASK_IDLE, rules), kI);
  }
}

// The values the issue saw stored raw: none is a state Perfetto knows.
TEST(TaskStateTest, ModifierBitsAreDropped) {
  for (uint32_t rules : {kOld, kMasked, kNewest}) {
    EXPECT_EQ(Reported(kFreezable | RS_TASK_INTERRUPTIBLE, rules), kS);  // 0x2001
    EXPECT_EQ(Reported(kKillable, rules), kD);                           // 0x102
    EXPECT_EQ(Reported(kFreezable | kKillable, rules), kD);              // 0x2102
  }
}

TEST(TaskStateTest, ExitStateFoldsIn) {
  for (uint32_t rules : {kOld, kMasked, kNewest}) {
    EXPECT_EQ(Reported(kDead, rules, kExitZombie), kZ);
    EXPECT_EQ(Reported(kDead, rules, kExitDead), kX);
    EXPECT_EQ(Reported(kDead, rules, kExitZombie | kExitDead), kZ);  // The highest bit wins.
  }
}

TEST(TaskStateTest, IdleFreezableIsDBefore66AndIAfter) {
  EXPECT_EQ(Reported(RS_TASK_IDLE | kFreezable, kOld), kD);
  EXPECT_EQ(Reported(RS_TASK_IDLE | kFreezable, kMasked), kI);
  EXPECT_EQ(Reported(RS_TASK_IDLE | kFreezable, kNewest), kI);
}

TEST(TaskStateTest, RtLockWaitIsD) {
  for (uint32_t rules : {kOld, kMasked, kNewest}) {
    EXPECT_EQ(Reported(RS_TASK_RTLOCK_WAIT, rules), kD);
  }
  // With another bit beside it, only the masked test sees it.
  EXPECT_EQ(Reported(RS_TASK_RTLOCK_WAIT | kFreezable, kOld), kR);
  EXPECT_EQ(Reported(RS_TASK_RTLOCK_WAIT | kFreezable, kMasked), kD);
}

TEST(TaskStateTest, FrozenIsRBefore613AndDAfter) {
  EXPECT_EQ(Reported(RS_TASK_FROZEN, kOld), kR);
  EXPECT_EQ(Reported(RS_TASK_FROZEN, kMasked), kR);
  EXPECT_EQ(Reported(RS_TASK_FROZEN, kNewest), kD);
}

TEST(TaskStateRulesTest, MainlineReleases) {
  EXPECT_EQ(TaskStateRulesForRelease("5.18.0"), kOld);
  EXPECT_EQ(TaskStateRulesForRelease("6.5.13"), kOld);
  EXPECT_EQ(TaskStateRulesForRelease("6.6"), kMasked);
  EXPECT_EQ(TaskStateRulesForRelease("6.12.7"), kMasked);
  EXPECT_EQ(TaskStateRulesForRelease("6.13.0-rc7"), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("6.18.44-fc-v669"), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("7.0.1"), kNewest);
}

TEST(TaskStateRulesTest, StableBackports) {
  EXPECT_EQ(TaskStateRulesForRelease("6.1.122"), kOld);
  EXPECT_EQ(TaskStateRulesForRelease("6.1.123-1-amd64"), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("6.6.68"), kMasked);
  EXPECT_EQ(TaskStateRulesForRelease("6.6.69"), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("6.12.8+deb13-amd64"), kNewest);
}

TEST(TaskStateRulesTest, UnparseableReleaseGetsTheNewestRules) {
  EXPECT_EQ(TaskStateRulesForRelease(""), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("linux"), kNewest);
  EXPECT_EQ(TaskStateRulesForRelease("6"), kNewest);
}

}  // namespace
}  // namespace ringside::bpf
