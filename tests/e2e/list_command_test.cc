// `ringside list`: the real binary.

#include <string>

#include "gtest/gtest.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

// The BPF groups are not -e events, though they are named like them: the
// list sets them apart and says where they are turned on (issue 39).
TEST(ListCommandTest, BpfGroupsAreListedApartWithWhereTheyAreTurnedOn) {
  int code = -1;
  std::string out = testing::RunRingsideCapture({"list", "bpf:*"}, &code);
  EXPECT_EQ(code, 0);
  const size_t heading = out.find("BPF program groups");
  ASSERT_NE(heading, std::string::npos) << out;
  EXPECT_LT(heading, out.find("bpf:sched")) << out;
  EXPECT_NE(out.find("not -e events"), std::string::npos) << out;
  EXPECT_NE(out.find("linux.bpf"), std::string::npos) << out;
  RINGSIDE_REQUIRE_TRACEFS();
  // With both, the ftrace events are under a heading of their own.
  out = testing::RunRingsideCapture({"list"}, &code);
  EXPECT_EQ(code, 0);
  const size_t ftrace_heading = out.find("ftrace events");
  ASSERT_NE(ftrace_heading, std::string::npos) << out;
  EXPECT_LT(out.find("bpf:incidents"), ftrace_heading);
  EXPECT_LT(ftrace_heading, out.find("sched:sched_switch"));
  // Only ftrace events: just them, as before, for scripts that read the list.
  out = testing::RunRingsideCapture({"list", "sched:sched_switch"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.rfind("sched:sched_switch", 0), 0u) << out;
}

}  // namespace
}  // namespace ringside::agent
