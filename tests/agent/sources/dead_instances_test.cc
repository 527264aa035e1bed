#include "agent/sources/dead_instances.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "ftrace/tracefs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

using ::ringside::ftrace::testing::InstanceExists;
using ::ringside::ftrace::testing::KernelTracefs;
using ::testing::Contains;
using ::testing::Not;

// What a recorder killed with kill -9 leaves: ringside-<name>-<id>, with no
// process holding its lock. Removed at the end if the test did not.
class OrphanInstance {
 public:
  OrphanInstance() {
    char id[17];
    std::snprintf(id, sizeof(id), "%08x%08x", static_cast<unsigned>(getpid()), 0xdeadu);
    name_ = absl::StrCat(ftrace::Instance::kPrefix, "t-dead-", id);
    made_ = mkdir(path().c_str(), 0700) == 0;
  }
  ~OrphanInstance() {
    if (InstanceExists(name_)) rmdir(path().c_str());
  }
  bool made() const { return made_; }
  const std::string& name() const { return name_; }

 private:
  std::string path() const { return KernelTracefs()->root() + "/instances/" + name_; }
  std::string name_;
  bool made_ = false;
};

TEST(DeadInstancesTest, AnInstanceNobodyHoldsIsRemovedAndNamed) {
  RINGSIDE_REQUIRE_TRACEFS();
  OrphanInstance orphan;
  ASSERT_TRUE(orphan.made());
  EXPECT_THAT(RemoveDeadRecordersInstances(), Contains(orphan.name()));
  EXPECT_FALSE(InstanceExists(orphan.name()));
}

TEST(DeadInstancesTest, AnInstanceItsOwnerHoldsIsKept) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto owned = ftrace::Instance::Create(*KernelTracefs(), "t-owned");
  ASSERT_TRUE(owned.ok()) << owned.status();
  const std::string name = (*owned)->relative_path().substr(sizeof("instances/") - 1);
  EXPECT_THAT(RemoveDeadRecordersInstances(), Not(Contains(name)));
  EXPECT_TRUE(InstanceExists(name));
}

}  // namespace
}  // namespace ringside::agent
