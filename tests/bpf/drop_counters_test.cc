// The drop counters as the reader reads them: through the map's memory,
// the counts the programs write (here, written as a program would, through
// the map), CPU by CPU and type by type, with no system call per read.

#include "bpf/drop_counters.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "bpf/common_events.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

TEST(DropCountersTest, ReadsWhatIsWrittenIntoTheMapByCpuAndType) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF) to create a BPF map";
  absl::StatusOr<DropCounters> made = DropCounters::Create(3);
  ASSERT_TRUE(made.ok()) << made.status();
  DropCounters drops = std::move(*made);
  EXPECT_EQ(drops.of_cpu(0), 0u);
  // CPU 1's counts: 5 switches and 2 wakings refused.
  std::vector<uint64_t> value(RS_EV_MAX, 0);
  value[RS_EV_SCHED_SWITCH] = 5;
  value[RS_EV_SCHED_WAKING] = 2;
  const uint32_t cpu = 1;
  ASSERT_EQ(bpf_map_update_elem(drops.fd(), &cpu, value.data(), BPF_ANY), 0);
  EXPECT_EQ(drops.count(1, RS_EV_SCHED_SWITCH), 5u);
  EXPECT_EQ(drops.count(1, RS_EV_SCHED_WAKING), 2u);
  EXPECT_EQ(drops.of_cpu(1), 7u);
  EXPECT_EQ(drops.of_cpu(0), 0u);
  EXPECT_EQ(drops.of_cpu(2), 0u);
  EXPECT_EQ(drops.per_cpu(RS_EV_SCHED_SWITCH), (std::vector<uint64_t>{0, 5, 0}));
  // Out of range reads nothing rather than past the map.
  EXPECT_EQ(drops.count(3, RS_EV_SCHED_SWITCH), 0u);
  EXPECT_EQ(drops.count(0, RS_EV_MAX), 0u);
  // Moved, the counters go along; the one moved from reads nothing.
  DropCounters moved = std::move(drops);
  EXPECT_EQ(moved.of_cpu(1), 7u);
  EXPECT_EQ(drops.of_cpu(1), 0u);  // NOLINT(bugprone-use-after-move): what a move leaves.
}

TEST(DropCountersTest, NoCountersReadZero) {
  const DropCounters none;
  EXPECT_EQ(none.of_cpu(0), 0u);
  EXPECT_TRUE(none.per_cpu(RS_EV_SCHED_SWITCH).empty());
}

}  // namespace
}  // namespace ringside::bpf
