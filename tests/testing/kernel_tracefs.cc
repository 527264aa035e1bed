#include "tests/testing/kernel_tracefs.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <string>

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

std::set<std::string> InstancesHeldBy(pid_t pid) {
  std::set<std::string> names;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* fds = opendir(fd_dir.c_str());
  if (fds == nullptr) return names;
  const std::string marker = std::string("/instances/") + Instance::kPrefix;
  while (dirent* entry = readdir(fds)) {
    char target[4096];
    const std::string link = fd_dir + "/" + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string path(target, static_cast<size_t>(n));
    const size_t at = path.find(marker);
    if (at == std::string::npos) continue;
    // The instance's directory itself (not a file in it, not " (deleted)").
    const std::string name = path.substr(at + sizeof("/instances/") - 1);
    if (name.find('/') == std::string::npos && name.find(' ') == std::string::npos) {
      names.insert(name);
    }
  }
  closedir(fds);
  return names;
}

bool InstanceExists(const std::string& name) {
  struct stat st;
  return KernelTracefs().ok() &&
         stat((KernelTracefs()->root() + "/instances/" + name).c_str(), &st) == 0;
}

}  // namespace ringside::ftrace::testing
