#ifndef RINGSIDE_TESTS_TESTING_CPU_OFFLINE_H_
#define RINGSIDE_TESTS_TESTING_CPU_OFFLINE_H_

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace ringside::testing {

// Puts a CPU offline for a while; always back online when it ends, even
// when the test fails midway.
class CpuOffline {
 public:
  explicit CpuOffline(int cpu)
      : path_(absl::StrCat("/sys/devices/system/cpu/cpu", cpu, "/online")) {}
  ~CpuOffline() {
    if (offline_) Write("1");
  }
  CpuOffline(const CpuOffline&) = delete;
  CpuOffline& operator=(const CpuOffline&) = delete;

  bool Offline() { return offline_ = Write("0"); }
  bool Online() {
    if (!Write("1")) return false;
    offline_ = false;
    return true;
  }

 private:
  bool Write(const char* value) {
    const int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = write(fd, value, 1) == 1;
    close(fd);
    return ok;
  }
  std::string path_;
  bool offline_ = false;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_CPU_OFFLINE_H_
