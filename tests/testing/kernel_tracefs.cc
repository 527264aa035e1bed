#include "tests/testing/kernel_tracefs.h"

#include <dirent.h>
#include <unistd.h>

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

std::string InstanceHeldByThisProcess(const std::string& name) {
  const std::string wanted = std::string("/instances/") + Instance::kPrefix + name + "-";
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return "";
  std::string found;
  while (dirent* entry = readdir(fds)) {
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    char target[4096];
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string path(target, static_cast<size_t>(n));
    const size_t at = path.find(wanted);
    // Exactly <id> after the name: not ringside-<name>-more-<id>, nor a
    // removed directory (" (deleted)").
    if (at != std::string::npos && path.size() == at + wanted.size() + 16) found = path;
  }
  closedir(fds);
  return found;
}

}  // namespace ringside::ftrace::testing
