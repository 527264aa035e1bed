#include "tests/testing/kernel_tracefs.h"

#include <optional>

#include "gtest/gtest.h"

namespace ringside::ftrace::testing {
namespace {

std::optional<absl::StatusOr<Tracefs>>& Slot() {
  static std::optional<absl::StatusOr<Tracefs>> slot;
  return slot;
}

class UnmountAtExit : public ::testing::Environment {
 public:
  void TearDown() override {
    if (Slot().has_value() && Slot()->ok() && (*Slot())->mounted_by_us()) {
      EXPECT_TRUE((*Slot())->Unmount().ok());
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new UnmountAtExit);

}  // namespace

const absl::StatusOr<Tracefs>& KernelTracefs() {
  if (!Slot().has_value()) Slot() = Tracefs::Open();
  return *Slot();
}

}  // namespace ringside::ftrace::testing
