#ifndef RINGSIDE_TESTS_TESTING_KERNEL_TRACEFS_H_
#define RINGSIDE_TESTS_TESTING_KERNEL_TRACEFS_H_

#include <sys/types.h>

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "ftrace/tracefs.h"

namespace ringside::ftrace::testing {

// The machine's tracefs for tests against the real kernel, opened (and
// mounted if need be) once per test binary; unmounted at exit if the tests
// mounted it, so the kernel is left as it was found. Tests skip, naming the
// missing privilege, when it cannot be had.
const absl::StatusOr<Tracefs>& KernelTracefs();

// The path of the instance ringside-<name>-<id> that this process owns
// (holds the lock fd of), for tests that create one through a data source;
// "" if none. Other processes' instances of the same name (another test run)
// are not it.
std::string InstanceHeldByThisProcess(const std::string& name);

// The names of the ringside instances (ringside-*) that process `pid` holds
// open: an agent's own, whatever other runs have made meanwhile.
std::set<std::string> InstancesHeldBy(pid_t pid);
// Whether the instance `name` (a directory under instances/) is there.
bool InstanceExists(const std::string& name);

}  // namespace ringside::ftrace::testing

// Skips the current test when tracefs cannot be used here.
#define RINGSIDE_REQUIRE_TRACEFS()                                                                \
  do {                                                                                            \
    if (!::ringside::ftrace::testing::KernelTracefs().ok()) {                                     \
      GTEST_SKIP() << "needs tracefs: " << ::ringside::ftrace::testing::KernelTracefs().status(); \
    }                                                                                             \
  } while (0)

#endif  // RINGSIDE_TESTS_TESTING_KERNEL_TRACEFS_H_
