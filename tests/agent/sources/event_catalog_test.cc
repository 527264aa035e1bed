#include "agent/sources/event_catalog.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::agent {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(EventCatalogTest, BpfGroupsNameWhatTurnsThemOnAndWhatTheyEmit) {
  const std::vector<BpfGroupListing> groups = BpfGroupListings();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_STREQ(groups[0].name, "bpf:sched");
  EXPECT_STREQ(groups[0].config, "bpf_config { sched: true }");
  EXPECT_THAT(groups[0].emits, HasSubstr("sched_switch ("));
  EXPECT_STREQ(groups[1].name, "bpf:process");
  EXPECT_THAT(groups[1].emits, HasSubstr("sched_process_fork"));
  EXPECT_STREQ(groups[2].name, "bpf:incidents");
  EXPECT_STREQ(groups[2].config, "bpf_config { incidents: true }");
}

TEST(EventCatalogTest, BpfRecordsTheTracepointsOfTheGroupsItsConfigTurnsOn) {
  config::BpfConfig sched_only;
  sched_only.set_process(false);
  EXPECT_THAT(BpfRecordedTracepoints(sched_only), Contains("sched/sched_switch"));
  EXPECT_THAT(BpfRecordedTracepoints(sched_only), Not(Contains("sched/sched_process_fork")));
  config::BpfConfig process_only;
  process_only.set_sched(false);
  EXPECT_THAT(BpfRecordedTracepoints(process_only), Contains("sched/sched_process_fork"));
  EXPECT_THAT(BpfRecordedTracepoints(process_only), Not(Contains("sched/sched_switch")));
}

TEST(EventCatalogTest, FtraceEventsComeFromThisKernel) {
  RINGSIDE_REQUIRE_TRACEFS();
  absl::StatusOr<FtraceEventCatalog> catalog = FtraceEventCatalog::Open();
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<std::string> available = catalog->AvailableEvents();
  ASSERT_TRUE(available.ok()) << available.status();
  EXPECT_THAT(*available, HasSubstr("sched:sched_switch\n"));
  EXPECT_TRUE(catalog->Exists("sched/sched_switch"));
  EXPECT_TRUE(catalog->Exists("sched"));
  EXPECT_FALSE(catalog->Exists("sched/no_such_event"));
  absl::StatusOr<std::vector<std::string>> fields =
      catalog->FieldDeclarations("sched", "sched_switch");
  ASSERT_TRUE(fields.ok()) << fields.status();
  EXPECT_THAT(*fields, Contains("pid_t prev_pid"));
  EXPECT_FALSE(catalog->FieldDeclarations("sched", "no_such_event").ok());
}

}  // namespace
}  // namespace ringside::agent
