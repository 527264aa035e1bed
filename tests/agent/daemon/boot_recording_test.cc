// What the agent says of the previous boot's ring (LostPreviousBoot): the
// boot ring's own states are BootRecorder's tests; the whole path, with a
// real panic and reboot, is the kernel matrix's (tests/kernels, 6.12).

#include "agent/daemon/boot_recording.h"

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using State = BootRecorder::Report::State;

BootRecorder::Report Recording() {
  BootRecorder::Report r;
  r.state = State::kRecording;
  return r;
}

TEST(BootRecordingTest, AnEarlierBootRecordedButNotFoundIsLost) {
  EXPECT_EQ(LostPreviousBoot("boot-a", Recording(), "boot-b"), "boot-a");
}

TEST(BootRecordingTest, NothingIsLostWhenItsEventsWereThereOrNeverRecorded) {
  EXPECT_EQ(LostPreviousBoot(std::nullopt, Recording(), "boot-b"), "");  // Never recorded.
  EXPECT_EQ(LostPreviousBoot("boot-b", Recording(), "boot-b"), "");      // This boot's.
  BootRecorder::Report taken = Recording();
  taken.previous_boot_taken = true;  // Read into a snapshot.
  EXPECT_EQ(LostPreviousBoot("boot-a", taken, "boot-b"), "");
  BootRecorder::Report resumed = Recording();
  resumed.resumed = true;
  EXPECT_EQ(LostPreviousBoot("boot-a", resumed, "boot-b"), "");
  BootRecorder::Report left;
  left.state = State::kPreviousBoot;  // There, left as they are.
  EXPECT_EQ(LostPreviousBoot("boot-a", left, "boot-b"), "");
  EXPECT_EQ(LostPreviousBoot("boot-a", Recording(), ""), "");  // This boot unknown.
}

}  // namespace
}  // namespace ringside::agent
