#include "agent/output/file_retention.h"

#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "agent/output/output_dir.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ListDir;
using testing::ScratchDir;

const absl::Time kWhen = absl::FromUnixSeconds(1795000000);  // 20261121T...

// A DaemonSet's pod has a host name of its own, new with every pod: files
// named after it would be a stranger's to the next pod. With machine_name
// (the node's), files are named after it, and those named after the host
// name (written before machine_name was set) are still the machine's own.
TEST(FileHostTest, NamesFilesAfterTheMachineNameAndTakesTheHostNamedOnesAsItsOwn) {
  const std::string host = LocalHostname();
  ASSERT_NE(host, "node-7");
  const FileHost local = FileHost::Local("node-7");
  EXPECT_EQ(local.name(), "node-7");
  const std::string stem = AgentFileStem(local.name(), kWhen);
  EXPECT_TRUE(absl::StartsWith(stem, "node-7-2026")) << stem;
  EXPECT_EQ(AgentFileRest(stem + "-crash.pftrace", local), "crash");
  EXPECT_EQ(AgentFileRest(AgentFileStem(host, kWhen) + "-crash.pftrace", local), "crash");
  EXPECT_EQ(AgentFileRest(AgentFileStem("node-8", kWhen) + "-crash.pftrace", local), std::nullopt);
  // Without machine_name, the host name is the only name.
  EXPECT_EQ(FileHost::Local("").name(), host);
  EXPECT_EQ(AgentFileRest(stem + "-crash.pftrace", FileHost::Local("")), std::nullopt);
}

// machine_name is any printable name: one starting with '.' still makes
// files a shipper's "*.pftrace.json" finds, never hidden ones.
TEST(FileHostTest, ANameStartingWithADotMakesNoHiddenFile) {
  const std::string stem = AgentFileStem(".node", kWhen);
  EXPECT_TRUE(absl::StartsWith(stem, "_node-")) << stem;
  EXPECT_EQ(AgentFileRest(stem + "-crash.pftrace", FileHost(".node")), "crash");
  EXPECT_TRUE(absl::StartsWith(AgentFileStem("a/b", kWhen), "a_b-"));
}

// Files of both names are counted together, and the oldest go first by the
// time in their names, not by the name they start with.
TEST(PruneOldestFilesTest, OldestGoFirstWhicheverOfTheMachinesNamesTheyHave) {
  ScratchDir dir;
  const FileHost host("node-7", "pod-abc");
  const std::string oldest = AgentFileStem("pod-abc", kWhen) + "-crash.pftrace";
  const std::string second = AgentFileStem("node-7", kWhen + absl::Minutes(1)) + "-crash.pftrace";
  const std::string third = AgentFileStem("pod-abc", kWhen + absl::Minutes(2)) + "-crash.pftrace";
  const std::string newest = AgentFileStem("node-7", kWhen + absl::Minutes(3)) + "-crash.pftrace";
  const std::string other = AgentFileStem("node-8", kWhen - absl::Minutes(1)) + "-crash.pftrace";
  for (const std::string& name : {oldest, second, third, newest, other}) {
    std::ofstream(dir.Join(name)) << "trace";
  }
  absl::StatusOr<std::unique_ptr<OutputDir>> opened = OutputDir::Open(dir.path(), std::nullopt);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const PruneResult r = PruneOldestFiles(
      **opened, host,
      [&host](absl::string_view name) -> std::optional<int> {
        if (!AgentFileRest(name, host).has_value()) return std::nullopt;
        return 0;
      },
      /*max_files=*/2, /*max_bytes=*/0, newest);
  EXPECT_EQ(r.files_deleted, 2u);
  EXPECT_EQ(ListDir(dir.path()), (std::set<std::string>{third, newest, other}));
}

}  // namespace
}  // namespace ringside::agent
